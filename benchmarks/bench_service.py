"""Benchmark: the web service under a class's load, over HTTP, on this machine.

S simulated students send N submissions in bursts (a burst: every student at once) to `grader serve`,
in each of these modes, the modes alternating when there are several rounds:

  embedded    its 2 grading threads on the embedded SQLite store
  broker      `--broker` on Redis (RQ) and two `grader worker` processes sharing a PostgreSQL store
  store-poll  the same store with no queue in front of it: two processes that poll PostgreSQL for the
              next submission (`jobs.grade_next`, every 0.2 s when none waits), as a queue kept in
              the database itself would work (a measurement, not a mode of the product)

For each it prints submissions graded per minute, the time from submit to report (p50, p95, max), how
many were lost or stored twice (both must be 0), and the CPU a submission: of the grading processes
(serve, workers and their sandboxes, from a cgroup of their own) and of the databases and the broker
(Redis, PostgreSQL: a second cgroup). Redis and PostgreSQL are Debian's packages, started here on
loopback in temporary folders. Needs root (cgroups).

    python -m benchmarks.bench_service [--students 50] [--submissions 200] [--tier free] [--sandbox local]
                                       [--modes embedded,broker,store-poll] [--rounds 1]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cpu import CpuGroup, cgroups_writable
from grader.course.store import Store
from tests.servers import Postgres, Redis, fresh_database
from tests.service import STATE, Server, child_env, grader_command, import_roster, signed_in

ROOT = Path(__file__).resolve().parent.parent

EXERCISE = "continuous_batching"


def project_copy(folder: Path) -> Path:
    """The exercise with no wait between two submissions of a student (the benchmark's bursts)."""
    for top in ("exercises", "hidden_tests", "solutions"):
        shutil.copytree(ROOT / top / EXERCISE, folder / top / EXERCISE, ignore=shutil.ignore_patterns("__pycache__"))
    toml = folder / "exercises" / EXERCISE / "exercise.toml"
    toml.write_text(re.sub(r"submission_interval_s = \d+", "submission_interval_s = 0", toml.read_text()))
    return folder


def sources() -> Iterator[str]:
    from grader.core.exercise import load_exercise

    exercise = load_exercise(EXERCISE, ROOT)
    return itertools.cycle([p.read_text() for p in [exercise.reference, *exercise.mutants, exercise.stub]])


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


def descendants(root: int) -> list[int]:
    """`root` and every process under it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def adopt(group: CpuGroup, roots: list[int]) -> None:
    """Move these processes and all under them into `group`; what they start later follows them."""
    for root in roots:
        for pid in descendants(root):
            try:
                (group.path / "cgroup.procs").write_text(str(pid))
            except OSError:  # ended meanwhile
                pass


@dataclass
class Mode:
    server: Server
    db: str
    label: str
    grading: list[int]   # the grading processes' roots: serve, workers
    services: list[int]  # the databases' and the broker's


@contextlib.contextmanager
def embedded(folder: Path, sandbox: str) -> Iterator[Mode]:
    db = str(folder / "class.db")
    server = Server.start(folder / "serve.log", "--db", db, "--sandbox", sandbox, "--workers", "2", cwd=folder)
    try:
        yield Mode(server, db, "grader serve, 2 grading threads, SQLite", [server.process.pid], [])
    finally:
        server.stop()


# A worker of a queue kept in the database itself: it takes the next submission from the store, or
# waits a moment and looks again. Claims are the store's (an UPDATE that only one grader wins).
POLL_WORKER = """
import sys, time
from grader.sandbox.choose import choose_backend
from grader.sandbox.local import LocalBackend
from grader.service import jobs
from grader.course.store import Store
store, backend = Store(sys.argv[1]), choose_backend(sys.argv[2], warm=True)
if isinstance(backend, LocalBackend):
    backend.lanes = 1
while True:
    if jobs.grade_next(store, backend) is None:
        time.sleep(0.2)
"""


@contextlib.contextmanager
def scaled_out(folder: Path, sandbox: str, polling: bool) -> Iterator[Mode]:
    redis = Redis(folder)
    cluster = Postgres()
    workers: list[subprocess.Popen] = []
    try:
        db = fresh_database(cluster.url)
        server = Server.start(folder / "serve.log", "--broker", redis.url, "--db", db, "--sandbox", sandbox,
                              cwd=folder)
        for n in range(2):
            log = (folder / f"worker-{n}.log").open("w")
            command = [sys.executable, "-c", POLL_WORKER, db, sandbox] if polling else \
                grader_command("worker", "--broker", redis.url, "--db", db, "--sandbox", sandbox)
            workers.append(subprocess.Popen(command, cwd=folder, env=child_env(), stdout=log,
                                            stderr=subprocess.STDOUT))
        label = ("2 processes polling the PostgreSQL store (a queue in the database), no broker" if polling
                 else "grader serve --broker (RQ on Redis) + 2 grader worker, PostgreSQL")
        try:
            assert cluster.process is not None
            yield Mode(server, db, label, [server.process.pid, *(w.pid for w in workers)],
                       [redis.process.pid, cluster.process.pid])
        finally:
            server.stop()
            for worker in workers:
                worker.terminate()
                worker.wait(timeout=30)
    finally:
        redis.close()
        cluster.close()


MODES = {"embedded": embedded,
         "broker": lambda folder, sandbox: scaled_out(folder, sandbox, polling=False),
         "store-poll": lambda folder, sandbox: scaled_out(folder, sandbox, polling=True)}


def measure(mode: str, number: int, args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-service-") as scratch:
        folder = project_copy(Path(scratch))
        name = f"bench-service-{os.getpid()}-{mode}-{number}"
        grading, services = CpuGroup(name), CpuGroup(f"{name}-db")
        try:
            with MODES[mode](folder, args.sandbox) as found:
                adopt(grading, found.grading)
                adopt(services, found.services)
                before = grading.used(), services.used()
                result = run_load(found.server, args.students, args.submissions, args.tier, args.wait)
                used = grading.used() - before[0], services.used() - before[1]
                missing, twice = stored_once(found.db)
        finally:
            grading.remove()
            services.remove()
    lat = result["latencies"]
    print(f"\n{found.label} (round {number + 1})")
    print(f"  graded {result['graded']}/{result['sent']} in {result['elapsed']:.1f} s: "
          f"{result['per_minute']:.1f} submissions per minute")
    if lat:
        p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
        print(f"  submit to report: p50 {statistics.median(lat):.1f} s, p95 {p95:.1f} s, max {lat[-1]:.1f} s")
    if result["graded"]:
        print(f"  CPU a submission: {used[0] / result['graded']:.3f} s grading (serve, workers, sandboxes), "
              f"+ {used[1] / result['graded']:.3f} s databases and broker")
    print(f"  lost: {result['sent'] - result['graded'] + len(result['problems'])} "
          f"(store: {missing} without a scorecard, {twice} stored twice)")
    for problem in result["problems"][:5]:
        print(f"  {problem}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--tier", choices=("free", "premium"), default="free")
    parser.add_argument("--sandbox", choices=("local", "docker", "auto"), default="local")
    parser.add_argument("--modes", default="embedded,broker,store-poll")
    parser.add_argument("--rounds", type=int, default=1, help="each mode this many times, the modes alternating")
    parser.add_argument("--wait", type=float, default=1800, help="seconds to wait for the last grading")
    args = parser.parse_args()
    if not cgroups_writable():
        raise SystemExit("needs write access to the cgroup hierarchy (run as root)")
    modes = args.modes.split(",")
    unknown = set(modes) - set(MODES)
    if unknown:
        raise SystemExit(f"unknown mode(s) {', '.join(sorted(unknown))}: choose of {', '.join(MODES)}")
    print(f"{args.students} students, {args.submissions} submissions in bursts of {args.students}, "
          f"{args.tier} tier, {args.sandbox} sandbox")
    for number in range(args.rounds):
        shift = number % len(modes)
        for mode in [*modes[shift:], *modes[:shift]]:
            measure(mode, number, args)


if __name__ == "__main__":
    main()
