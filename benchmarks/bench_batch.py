"""Benchmark: batch grading throughput, `--jobs 1` against `--jobs 2`, local and Docker sandboxes.

Makes a class of N submissions (the reference, every mutant, the stub, in turn), grades it into a
fresh store with each setting, as `grader batch` does (a warm sandbox per thread), and prints
submissions per minute, the machine's CPU time per submission (every process: grader, harness,
workers, engine; from /proc/stat, so run it on an otherwise quiet machine) and the speed-up from one
job to two. On a 2-core machine the ideal speed-up is 2.

The same class also runs unprotected, as an autograder without isolation would: each submission
imported into a fresh `pytest -p grader.harness.inprocess` of the same suites, with the seed the
grader gives it ("in-process"), and the same in one throwaway `docker run --network none` each, as a
Gradescope-style autograder does ("docker-run"). Their CPU a submission, measured in the same run, is
the yardstick for the sandboxes' (local against in-process, Docker against docker-run): this
machine's speed changes from hour to hour, the ratios much less.

    python benchmarks/bench_batch.py [--count 100] [--tier premium]
                                     [--sandboxes in-process,local,docker-run,docker]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_docker import gradescope_style  # noqa: E402
from benchmarks.bench_harness import in_process  # noqa: E402
from grader.batch import discover, run_batch  # noqa: E402
from grader.exercise import load_exercise  # noqa: E402
from grader.sandbox.choose import choose_backend  # noqa: E402
from grader.sandbox.engine import engine_client  # noqa: E402
from grader.sandbox.image import ensure_image  # noqa: E402
from grader.seeding import seed_for_source  # noqa: E402
from grader.store import Store  # noqa: E402


def make_class(folder: Path, exercise, count: int) -> None:
    sources = itertools.cycle([exercise.reference, *exercise.mutants, exercise.stub])
    for number in range(count):
        source = next(sources)
        # A trailing comment makes every file distinct, as real submissions are.
        (folder / f"student{number:03d}.py").write_bytes(source.read_bytes() + f"\n# {number}\n".encode())


ENGINE_PROCESSES = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "docker-init")


def engine_cpu_seconds() -> float:
    """CPU time used so far by the container engine's own processes (dockerd, containerd, shims, runc)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if name in ENGINE_PROCESSES or name.startswith("containerd-shim"):
            fields = stat[stat.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU time the whole machine spent busy so far (every core, every process), from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def timed_batch(folder: Path, exercise, tier: str, sandbox: str, jobs: int) -> tuple[float, int, float, float]:
    """(seconds, submissions graded, engine CPU seconds, machine CPU seconds) of one batch, graded as
    `grader batch` does (a warm sandbox per thread)."""
    with tempfile.TemporaryDirectory() as scratch, Store(Path(scratch) / "bench.db") as store:
        engine_before, machine_before = engine_cpu_seconds(), machine_busy_seconds()
        started = time.perf_counter()
        summary = run_batch(store, exercise, tier, lambda: choose_backend(sandbox, warm=True),
                            discover(folder, exercise), jobs=jobs)
        elapsed = time.perf_counter() - started
        engine, machine = engine_cpu_seconds() - engine_before, machine_busy_seconds() - machine_before
    if summary.problems:
        raise SystemExit(f"problems in the batch: {summary.problems[:3]}")
    return elapsed, len(summary.graded), engine, machine


def timed_unprotected(folder: Path, exercise, tier: str, jobs: int, in_docker: bool) -> tuple[float, int, float, float]:
    """The same figures for the class run unprotected: each submission in a fresh in-process pytest
    (its own Python and pytest start, as the sandboxes pay a harness each), in a throwaway container
    of its own with `in_docker`, `jobs` at a time."""
    files = sorted(folder.glob("*.py"))
    if in_docker:
        client = engine_client()
        image = ensure_image(client, None, exercise.packages)
        run = lambda path, seed: gradescope_style(client, image, exercise, tier, path, seed,  # noqa: E731
                                                  failures_allowed=True)
    else:
        run = lambda path, seed: in_process(exercise, tier, path, seed, failures_allowed=True)  # noqa: E731
    engine_before, machine_before = engine_cpu_seconds(), machine_busy_seconds()
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda path: run(path, seed_for_source(path.read_bytes(), exercise)), files))
    elapsed = time.perf_counter() - started
    return elapsed, len(files), engine_cpu_seconds() - engine_before, machine_busy_seconds() - machine_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--tier", default="premium")
    parser.add_argument("--sandboxes", default="in-process,local,docker-run,docker")
    parser.add_argument("--exercise", default="continuous_batching")
    args = parser.parse_args()
    exercise = load_exercise(args.exercise, ROOT)
    folder = Path(tempfile.mkdtemp(prefix="grader-bench-class-"))
    try:
        make_class(folder, exercise, args.count)
        print(f"{args.count} submissions of {exercise.slug} (reference, {len(exercise.mutants)} mutants, stub), "
              f"tier {args.tier}")
        # CPU a submission of the unprotected runs, by name and jobs: each sandbox's yardstick
        unprotected: dict[tuple[str, int], float] = {}
        yardstick = {"local": "in-process", "docker": "docker-run"}
        for sandbox in args.sandboxes.split(","):
            if sandbox != "in-process":
                choose_backend("docker" if sandbox == "docker-run" else sandbox)  # fails early without an engine
            if sandbox in ("in-process", "docker-run"):
                in_docker = sandbox == "docker-run"
                run = lambda jobs: timed_unprotected(folder, exercise, args.tier, jobs, in_docker)  # noqa: E731, B023 (called in this turn)
            else:
                run = lambda jobs: timed_batch(folder, exercise, args.tier, sandbox, jobs)  # noqa: E731, B023 (called in this turn)
            one, graded, engine_one, cpu_one = run(1)
            two, _, engine_two, cpu_two = run(2)

            def engine(cpu: float, graded: int = graded, sandbox: str = sandbox) -> str:
                return f", engine CPU {cpu / graded * 1000:.0f} ms" if "docker" in sandbox else ""
            for jobs, elapsed, cpu, engine_cpu in ((1, one, cpu_one, engine_one), (2, two, cpu_two, engine_two)):
                per_submission = cpu / graded
                unprotected[sandbox, jobs] = per_submission
                base = unprotected.get((yardstick.get(sandbox, ""), jobs))
                against = f" ({per_submission / base:.2f}x {yardstick[sandbox]})" if base else ""
                print(f"  {sandbox:10s} --jobs {jobs}: {elapsed:6.1f} s, {graded / elapsed * 60:6.1f} submissions/min, "
                      f"machine CPU {per_submission:.2f} s a submission{against}{engine(engine_cpu)}"
                      + (f"   speed-up {one / two:.2f}x" if jobs == 2 else ""))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
