"""Benchmark: the Docker sandbox against a Gradescope-style `docker run`, the local sandbox and the floor.

Grades one class (copies of the reference by default, each made distinct) every way there is to grade
with Docker, in alternating rounds, each case in a cgroup of its own; the containers a case starts are
placed under its group (`cgroup_parent`), so their CPU is counted in it:

  floor          the suites' tests called in one warm process (`floor.py`)
  in-process     a fresh `pytest -p grader.harness.inprocess` a submission: no isolation at all
  docker-run     one throwaway `docker run` of the in-process suites a submission (Gradescope's way)
  docker-single  the Docker sandbox, a cold container a submission, in a fresh Python a submission
                 (`grader grade --sandbox docker` without the command line's start)
  docker         `grader batch`'s grading with the Docker sandbox (a warm container ready for each)
  sandbox        the local sandbox in a fresh Python a submission, for comparison

Then, apart and in wall time, where a cold Docker grading's time goes: creating and starting the
container (and sending the job in), the harness inside, the teardown.

    python -m benchmarks.bench_docker [--count 6] [--rounds 3] [--tier premium] [--class reference]

Needs root (it makes cgroups) and a Docker engine.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from benchmarks.bench_batch import arguments, compare
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.sandbox.docker_backend import DockerBackend
from grader.sandbox.engine import engine_client
from grader.sandbox.image import ensure_image

ROOT = Path(__file__).resolve().parent.parent

CASES = ("floor", "in-process", "docker-run", "docker-single", "docker", "sandbox")


def main() -> None:
    args = arguments(__doc__.split("\n\n")[0], CASES, 6, "reference")
    client = engine_client()
    if client is None:
        raise SystemExit("no Docker engine is reachable (start one with .ci/docker-up.sh)")
    exercise = load_exercise(args.exercise, ROOT)
    started = time.perf_counter()
    ensure_image(client, None, exercise.packages)
    print(f"grading image ready in {time.perf_counter() - started:.2f} s")
    compare(args)
    backend = DockerBackend(client)
    data = exercise.reference.read_bytes()
    parts: dict[str, list[float]] = {"all": [], "create+start": [], "harness": [], "teardown": []}
    for run in range(args.rounds + 1):  # the first warms caches and is not counted
        began = time.perf_counter()
        card = grade_bytes(data, exercise, args.tier, backend, "docker")
        elapsed = time.perf_counter() - began
        if card.score != card.max_score:
            raise SystemExit(f"the reference did not get full marks through Docker: {card.reason}")
        if run:
            timings = backend.last_timings
            parts["all"].append(elapsed)
            parts["create+start"].append(timings.create_and_start_s)
            parts["harness"].append(timings.harness_s)
            parts["teardown"].append(timings.teardown_s)
    backend.close()
    med = {name: statistics.median(values) for name, values in parts.items()}
    print(f"  a cold Docker grading of the reference, wall time (medians of {args.rounds}): {med['all']:.3f} s")
    print(f"    create + start + job in: {med['create+start']:.3f} s")
    print(f"    harness in container:    {med['harness']:.3f} s")
    print(f"    teardown (remove):       {med['teardown']:.3f} s")
    other = med["all"] - med["create+start"] - med["harness"] - med["teardown"]
    print(f"    other (validate, judge): {other:.3f} s")


if __name__ == "__main__":
    main()
