"""Benchmark: from `docker-compose up -d` to the first graded submission, on this machine.

The course server's stack (docker-compose.yml) on images built as CI builds them (tests/stack.py: the base
`grader image build` made, Debian's packages, the project's wheels), with fresh volumes each round: an
empty PostgreSQL initialised, the schema migrated, Caddy's certificate made. Each round times

  up       `up -d` itself, until every container is started (Compose waits for the health checks that
           `depends_on` names: PostgreSQL and Redis, then the web service)
  ready    from `up` until the proxy answers over TLS with a page of `grader serve`
  graded   from `up` until a student's first submission (the reference, on the free tier) is graded by a
           worker in the Docker sandbox, signed in and submitted through the proxy as a browser would

The images are built before the first round and not counted (`build` is printed apart: cached layers after
the first time). Needs a Docker engine, docker-compose (or the compose plugin), and the grading image.

    python -m benchmarks.bench_stack_up [--rounds 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

EXERCISE = "continuous_batching"


def one_round(number: int, folder: Path, images: dict[str, str]) -> dict[str, float]:
    from tests.service import csrf_of, press_sign_in, wait_graded
    from tests.stack import PROJECT, STUDENT_LINK, stack

    with stack(f"bench{number}", folder, images) as where:
        start = time.monotonic()
        where.up()
        figures = {"up": time.monotonic() - start}
        where.wait_ready()
        figures["ready"] = time.monotonic() - start
        client = where.client()
        pressed = press_sign_in(client, where.instructor_link())
        csrf = csrf_of(client.get(pressed.headers["location"]))
        roster = client.post("/instructor/roster", data={"csrf": csrf, "csv": "id,tier\nada,free\n"}).text
        link = re.sub(r"^https?://[^/]+", "", dict(STUDENT_LINK.findall(roster))["ada"])
        student = where.client()
        pressed = press_sign_in(student, link)
        token = csrf_of(student.get(pressed.headers["location"]))
        student.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "1"})
        code = (PROJECT / "solutions" / EXERCISE / "scheduler.py").read_text()
        submitted = student.post(f"/exercises/{EXERCISE}/submit", data={"csrf": token, "code": code})
        wait_graded(student, submitted.url.path, wait_s=600)
        figures["graded"] = time.monotonic() - start
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from tests.stack import Stack, compose_command, prepare_images

    if compose_command() is None:
        raise SystemExit("needs docker-compose or the compose plugin (Debian: apt-get install docker-compose)")
    with tempfile.TemporaryDirectory(prefix="bench-stack-") as temporary:
        folder = Path(temporary)
        start = time.monotonic()
        images = prepare_images()
        Stack(name="benchbuild", folder=folder, images=images).build()
        print(f"build (wheels, images; not counted): {time.monotonic() - start:.1f} s", flush=True)
        rounds = []
        for number in range(args.rounds):
            figures = one_round(number, folder, images)
            rounds.append(figures)
            print(f"round {number + 1}: " + "  ".join(f"{name} {value:.1f} s" for name, value in figures.items()),
                  flush=True)
    for name in ("up", "ready", "graded"):
        values = [r[name] for r in rounds]
        print(f"{name:>7}: median {statistics.median(values):.1f} s  (min {min(values):.1f}, max {max(values):.1f})")


if __name__ == "__main__":
    main()
