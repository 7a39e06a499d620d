"""Benchmark: grading the reference through Docker, through the local sandbox, and in-process.

Measured side by side in one run (alternating, so a busy machine slows all three alike), with the
Docker time split into its parts: container create/start (and sending the job), the harness run
inside, and teardown.

    python benchmarks/bench_docker.py [--runs 5] [--tier premium]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_harness import in_process, isolated  # noqa: E402

from grader.exercise import load_exercise  # noqa: E402
from grader.grading import grade_bytes  # noqa: E402
from grader.sandbox.docker_backend import DockerBackend  # noqa: E402
from grader.sandbox.engine import engine_client  # noqa: E402
from grader.sandbox.image import ensure_image  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tier", default="premium")
    parser.add_argument("--exercise", default="continuous_batching")
    args = parser.parse_args()
    client = engine_client()
    if client is None:
        raise SystemExit("no Docker engine is reachable (start one with .ci/docker-up.sh)")
    exercise = load_exercise(args.exercise, ROOT)
    started = time.perf_counter()
    ensure_image(client)
    print(f"grading image ready in {time.perf_counter() - started:.2f} s")
    backend = DockerBackend(client)
    data = exercise.reference.read_bytes()
    rows: dict[str, list[float]] = {k: [] for k in ("docker", "create+start", "harness", "teardown", "local", "in-process")}
    for run in range(args.runs + 1):  # the first round warms caches and is not counted
        t = time.perf_counter()
        card = grade_bytes(data, exercise, args.tier, backend, "docker")
        docker_s = time.perf_counter() - t
        if card.score != card.max_score:
            raise SystemExit(f"the reference did not get full marks through Docker: {card.reason}")
        local_s, _ = isolated(exercise, args.tier)
        plain_s = in_process(exercise, args.tier)
        if run == 0:
            continue
        timings = backend.last_timings
        rows["docker"].append(docker_s)
        rows["create+start"].append(timings.create_and_start_s)
        rows["harness"].append(timings.harness_s)
        rows["teardown"].append(timings.teardown_s)
        rows["local"].append(local_s)
        rows["in-process"].append(plain_s)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"exercise {exercise.slug}, tier {args.tier}, {len(card.tests)} tests, {args.runs} runs each (medians)")
    print(f"  docker sandbox:        {med['docker']:.3f} s")
    print(f"    create + start + job in: {med['create+start']:.3f} s")
    print(f"    harness in container:    {med['harness']:.3f} s")
    print(f"    teardown (remove):       {med['teardown']:.3f} s")
    print(f"    other (validate, judge): {med['docker'] - med['create+start'] - med['harness'] - med['teardown']:.3f} s")
    print(f"  local sandbox:         {med['local']:.3f} s")
    print(f"  in-process:            {med['in-process']:.3f} s")
    print(f"  ratio docker / in-process: {med['docker'] / med['in-process']:.2f}x")
    print(f"  ratio local / in-process:  {med['local'] / med['in-process']:.2f}x")
    print(f"  ratio docker / local:      {med['docker'] / med['local']:.2f}x")


if __name__ == "__main__":
    main()
