"""Benchmark: the web service under a class's load, over HTTP, on this machine.

S simulated students send N submissions in bursts (a burst: every student at once) to `grader serve`,
first with its 2 grading threads on the embedded SQLite store, then with `--broker` on Redis (RQ) and
two `grader worker` processes sharing a PostgreSQL store. For each it prints submissions graded per
minute, the time from submit to report (p50, p95, max) and how many were lost or stored twice (both
must be 0). Redis and PostgreSQL are Debian's packages, started here on loopback in temporary folders.

    python benchmarks/bench_service.py [--students 50] [--submissions 200] [--tier free] [--sandbox local]
                                       [--modes embedded,broker]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.store import Store  # noqa: E402
from tests.servers import Redis, fresh_database, postgres  # noqa: E402
from tests.service import STATE, Server, child_env, grader_command, import_roster, signed_in  # noqa: E402

EXERCISE = "continuous_batching"


def project_copy(folder: Path) -> Path:
    """The exercise with no wait between two submissions of a student (the benchmark's bursts)."""
    for top in ("exercises", "hidden_tests", "solutions"):
        shutil.copytree(ROOT / top / EXERCISE, folder / top / EXERCISE, ignore=shutil.ignore_patterns("__pycache__"))
    toml = folder / "exercises" / EXERCISE / "exercise.toml"
    toml.write_text(re.sub(r"submission_interval_s = \d+", "submission_interval_s = 0", toml.read_text()))
    return folder


def sources() -> Iterator[str]:
    solutions = ROOT / "solutions" / EXERCISE
    return itertools.cycle([p.read_text() for p in [solutions / "scheduler.py", *sorted((solutions / "mutants").glob("*.py")),
                                                    ROOT / "exercises" / EXERCISE / "scheduler.py"]])


def run_load(server: Server, students: int, submissions: int, tier: str, wait_s: float) -> dict:
    instructor, csrf = signed_in(server, server.instructor_link)
    roster = "id,tier\n" + "".join(f"b{n:03d},{tier}\n" for n in range(students))
    links = import_roster(server, instructor, csrf, roster)
    clients = []
    for n in range(students):
        client, token = signed_in(server, links[f"b{n:03d}"])
        client.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "2"})
        clients.append((client, token))
    code = sources()
    sent: dict[str, tuple[float, object]] = {}  # status path -> (time submitted, client)
    problems: list[str] = []

    def send(number: int) -> None:
        client, token = clients[number % students]
        started = time.monotonic()
        page = client.post(f"/exercises/{EXERCISE}/submit", data={"csrf": token, "code": next(code) + f"\n# {number}\n"})
        path = page.url.path
        if page.status_code != 200 or not re.fullmatch(r"/submissions/\d+", path):
            problems.append(f"submission {number}: HTTP {page.status_code}")
            return
        sent[path] = (started, client)

    graded: dict[str, float] = {}
    first = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        for burst in range(0, submissions, students):
            list(pool.map(send, range(burst, min(submissions, burst + students))))
            poll(sent, graded, until=time.monotonic() + 5)  # a pause between bursts, watching the queue
    deadline = time.monotonic() + wait_s
    while len(graded) < len(sent) and time.monotonic() < deadline:
        poll(sent, graded, until=time.monotonic() + 1)
    latencies = sorted(graded[p] - sent[p][0] for p in graded)
    elapsed = max(graded.values()) - first if graded else float("nan")
    return {"sent": len(sent), "graded": len(graded), "problems": problems, "elapsed": elapsed,
            "per_minute": 60 * len(graded) / elapsed if graded else 0.0, "latencies": latencies}


def poll(sent: dict, graded: dict, until: float) -> None:
    while time.monotonic() < until:
        for path, (_, client) in list(sent.items()):
            if path not in graded and STATE.findall(client.get(path).text) == ["graded"]:
                graded[path] = time.monotonic()
        time.sleep(0.2)


def stored_once(location: str) -> tuple[int, int]:
    """(submissions without a scorecard, submissions with more than one) in the store."""
    from sqlalchemy import text

    with Store(location) as store, store.reading() as db:
        missing = db.execute(text("SELECT count(*) FROM submissions s WHERE NOT EXISTS "
                                  "(SELECT 1 FROM scorecards c WHERE c.submission_id = s.id)")).scalar()
        twice = db.execute(text("SELECT count(*) FROM (SELECT submission_id FROM scorecards GROUP BY submission_id "
                                "HAVING count(*) > 1) d")).scalar()
    return int(missing or 0), int(twice or 0)


@contextlib.contextmanager
def embedded(folder: Path, sandbox: str) -> Iterator[tuple[Server, str, str]]:
    db = str(folder / "class.db")
    server = Server.start(folder / "serve.log", "--db", db, "--sandbox", sandbox, "--workers", "2", cwd=folder)
    try:
        yield server, db, "grader serve, 2 grading threads, SQLite"
    finally:
        server.stop()


@contextlib.contextmanager
def broker(folder: Path, sandbox: str) -> Iterator[tuple[Server, str, str]]:
    redis = Redis(folder)
    workers: list[subprocess.Popen] = []
    try:
        with postgres() as cluster:
            db = fresh_database(cluster)
            server = Server.start(folder / "serve.log", "--broker", redis.url, "--db", db, "--sandbox", sandbox,
                                  cwd=folder)
            for n in range(2):
                log = (folder / f"worker-{n}.log").open("w")
                workers.append(subprocess.Popen(grader_command("worker", "--broker", redis.url, "--db", db,
                                                               "--sandbox", sandbox),
                                                cwd=folder, env=child_env(), stdout=log, stderr=subprocess.STDOUT))
            try:
                yield server, db, "grader serve --broker (RQ on Redis) + 2 grader worker, PostgreSQL"
            finally:
                server.stop()
                for worker in workers:
                    worker.terminate()
                    worker.wait(timeout=30)
    finally:
        redis.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--tier", choices=("free", "premium"), default="free")
    parser.add_argument("--sandbox", choices=("local", "docker", "auto"), default="local")
    parser.add_argument("--modes", default="embedded,broker")
    parser.add_argument("--wait", type=float, default=1800, help="seconds to wait for the last grading")
    args = parser.parse_args()
    print(f"{args.students} students, {args.submissions} submissions in bursts of {args.students}, "
          f"{args.tier} tier, {args.sandbox} sandbox")
    for mode in args.modes.split(","):
        with tempfile.TemporaryDirectory(prefix="bench-service-") as scratch:
            folder = project_copy(Path(scratch))
            with {"embedded": embedded, "broker": broker}[mode](folder, args.sandbox) as (server, db, label):
                result = run_load(server, args.students, args.submissions, args.tier, args.wait)
                missing, twice = stored_once(db)
            lat = result["latencies"]
            print(f"\n{label}")
            print(f"  graded {result['graded']}/{result['sent']} in {result['elapsed']:.1f} s: "
                  f"{result['per_minute']:.1f} submissions per minute")
            if lat:
                p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
                print(f"  submit to report: p50 {statistics.median(lat):.1f} s, p95 {p95:.1f} s, max {lat[-1]:.1f} s")
            print(f"  lost: {result['sent'] - result['graded'] + len(result['problems'])} "
                  f"(store: {missing} without a scorecard, {twice} stored twice)")
            for problem in result["problems"][:5]:
                print(f"  {problem}")


if __name__ == "__main__":
    main()
