"""Benchmark: grading the reference through Docker, through the local sandbox, and in-process.

Measured side by side in one run (alternating, so a busy machine slows all alike), with the Docker
time split into its parts: container create/start (and sending the job), the harness run inside, and
teardown. Two more cases show what isolation costs against what others do: what a Gradescope-style
autograder does (one `docker run --network none` of the same suites run in-process, the submission
imported into pytest itself), and the Docker sandbox with a warm container (started and made ready
while the previous submission graded, as `batch` and `serve` do).

    python benchmarks/bench_docker.py [--runs 5] [--tier premium]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_harness import finished, in_process, isolated  # noqa: E402

from grader.exercise import load_exercise  # noqa: E402
from grader.grading import grade_bytes  # noqa: E402
from grader.sandbox.docker_backend import DockerBackend  # noqa: E402
from grader.sandbox.engine import engine_client  # noqa: E402
from grader.sandbox.image import ensure_image  # noqa: E402


def gradescope_style(client, image: str, exercise, tier: str, submission: Path | None = None,
                     seed: int | None = None, failures_allowed: bool = False, cgroup_parent: str | None = None
                     ) -> float:
    """One throwaway container that runs the suites in-process against the submission (the reference by
    default), no isolation inside: create, copy the files in, start, wait, remove."""
    suites = [spec for spec in exercise.suites_for(tier)]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for spec in suites:
            archive.add(str(spec.path), arcname=f"work/{spec.name}",
                        filter=lambda info: None if "__pycache__" in info.name else info)
        archive.add(str(submission or exercise.reference), arcname=f"work/{exercise.submission_file}")
        archive.add(str(exercise.reference), arcname=f"work/reference/{exercise.submission_file}")
    environment = {"GRADER_SUBMISSION": f"/work/{exercise.submission_file}",
                   "GRADER_REFERENCE": f"/work/reference/{exercise.submission_file}",
                   "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    if seed is not None:
        environment["GRADER_SEED"] = str(seed)
    started = time.perf_counter()
    container = client.containers.create(
        image, ["python3", "-m", "pytest", "-q", "-p", "grader.harness.inprocess", "-p", "no:cacheprovider",
                "-c", "/dev/null", "--rootdir", "/work", *[f"/work/{spec.name}" for spec in suites]],
        network_mode="none", working_dir="/work", environment=environment,
        **({"cgroup_parent": cgroup_parent} if cgroup_parent else {}))
    try:
        container.put_archive("/", buffer.getvalue())
        container.start()
        status = container.wait(timeout=300)["StatusCode"]
    finally:
        container.remove(force=True)
    elapsed = time.perf_counter() - started
    if not finished(status, failures_allowed):
        raise SystemExit(f"the Gradescope-style run failed with status {status}")
    return elapsed


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
    image = ensure_image(client)
    print(f"grading image ready in {time.perf_counter() - started:.2f} s")
    backend, warm = DockerBackend(client), DockerBackend(client, warm=True)
    data = exercise.reference.read_bytes()
    rows: dict[str, list[float]] = {k: [] for k in ("docker", "create+start", "harness", "teardown", "local",
                                                     "in-process", "gradescope", "warm")}
    for run in range(args.runs + 1):  # the first round warms caches and is not counted
        t = time.perf_counter()
        card = grade_bytes(data, exercise, args.tier, backend, "docker")
        docker_s = time.perf_counter() - t
        if card.score != card.max_score:
            raise SystemExit(f"the reference did not get full marks through Docker: {card.reason}")
        timings = backend.last_timings
        local_s, _ = isolated(exercise, args.tier)
        plain_s = in_process(exercise, args.tier)
        gradescope_s = gradescope_style(client, image, exercise, args.tier)
        t = time.perf_counter()
        grade_bytes(data, exercise, args.tier, warm, "docker")
        warm_s = time.perf_counter() - t
        if run == 0:
            continue
        rows["gradescope"].append(gradescope_s)
        rows["warm"].append(warm_s)
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
    print(f"  docker sandbox, warm:  {med['warm']:.3f} s  (the container started while the previous one graded)")
    print(f"  Gradescope-style run:  {med['gradescope']:.3f} s  (one docker run of the in-process suites)")
    print(f"  local sandbox:         {med['local']:.3f} s")
    print(f"  in-process:            {med['in-process']:.3f} s")
    print(f"  ratio docker / in-process: {med['docker'] / med['in-process']:.2f}x")
    print(f"  ratio local / in-process:  {med['local'] / med['in-process']:.2f}x")
    print(f"  ratio docker / local:      {med['docker'] / med['local']:.2f}x")
    print(f"  ratio docker / Gradescope-style:      {med['docker'] / med['gradescope']:.2f}x")
    print(f"  ratio docker warm / Gradescope-style: {med['warm'] / med['gradescope']:.2f}x")
    warm.close()


if __name__ == "__main__":
    main()
