"""Benchmark: this checkout against another one (an earlier commit, say), side by side: the same class of
submissions graded by both at the same time, `grader batch --jobs 1` each, each in a cgroup of its own,
and the CPU each used. On a shared or virtual machine whose speed changes from one minute to the next,
runs made one after the other cannot show a change of a few percent; run at once, both meet the same
machine.

With `--grade`, single gradings instead: one `grader grade` of each submission at a time, the two
checkouts in turn (two single gradings at once would each want both cores, as their lanes do), each
command in a cgroup of its own; the CPU and the wall time of each checkout's commands are compared.

    git worktree add /tmp/before HEAD~3
    python -m benchmarks.bench_side_by_side /tmp/before [--count 40] [--pairs 3] [--sandbox local] [--grade]

Needs write access to the cgroup hierarchy (cgroup v2, or v1's cpuacct controller): run it as root.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_batch import make_class
from benchmarks.cpu import CpuGroup
from grader.core.exercise import load_exercise

ROOT = Path(__file__).resolve().parent.parent


def pair(checkouts: list[Path], folder: Path, args: argparse.Namespace, scratch: Path, number: int
         ) -> tuple[list[float], float]:
    """The CPU seconds of each checkout's batch, all started at once, and the seconds until all ended."""
    groups = [CpuGroup(f"grader-bench-{os.getpid()}-{number}-{i}") for i in range(len(checkouts))]
    try:
        before = [group.used() for group in groups]
        started = time.perf_counter()
        running = []
        for i, (checkout, group) in enumerate(zip(checkouts, groups)):
            argv = [sys.executable, "-m", "grader.cli", "batch", str(folder), "--exercise", args.exercise,
                    "--tier", args.tier, "--jobs", "1", "--sandbox", args.sandbox,
                    "--db", str(scratch / f"pair{number}-{i}.db")]
            # `python -m` finds `grader` in the working folder first: each checkout grades with its own code
            # and its own suites.
            running.append(subprocess.Popen(group.command(argv), cwd=checkout, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.PIPE, text=True))
        for checkout, process in zip(checkouts, running):
            _, errors = process.communicate()
            if process.returncode != 0:
                raise SystemExit(f"the batch in {checkout} failed ({process.returncode}):\n{errors[-2000:]}")
        return [group.used() - used for group, used in zip(groups, before)], time.perf_counter() - started
    finally:
        for group in groups:
            group.remove()


def in_turn(checkouts: list[Path], folder: Path, args: argparse.Namespace, number: int
            ) -> tuple[list[float], list[float]]:
    """Each submission graded by `grader grade` from each checkout in turn: the CPU seconds and the wall
    seconds of each checkout's commands in all."""
    cpu, wall = [0.0] * len(checkouts), [0.0] * len(checkouts)
    for at, submission in enumerate(sorted(folder.glob("*.py"))):
        turn = list(enumerate(checkouts))
        for i, checkout in turn[at % 2:] + turn[:at % 2]:  # which one goes first alternates
            group = CpuGroup(f"grader-bench-{os.getpid()}-{number}-{at}-{i}")
            try:
                before, started = group.used(), time.perf_counter()
                argv = [sys.executable, "-m", "grader.cli", "grade", str(submission), "--exercise", args.exercise,
                        "--tier", args.tier, "--sandbox", args.sandbox, "--json", os.devnull]
                done = subprocess.run(group.command(argv), cwd=checkout, capture_output=True, text=True)
                wall[i] += time.perf_counter() - started
                cpu[i] += group.used() - before
            finally:
                group.remove()
            if done.returncode != 0:
                raise SystemExit(f"grader grade in {checkout} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="the other checkout (a git worktree of another commit)")
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--tier", default="premium")
    parser.add_argument("--sandbox", default="local", choices=["local", "docker"])
    parser.add_argument("--exercise", default="continuous_batching")
    parser.add_argument("--grade", action="store_true", help="single gradings in turn instead of batches at once")
    args = parser.parse_args()
    other = args.other.resolve()
    if not (other / "grader" / "__init__.py").is_file():  # grader/cli.py before it became a package
        raise SystemExit(f"{other} is not a checkout of this project")
    exercise = load_exercise(args.exercise, ROOT)
    with tempfile.TemporaryDirectory(prefix="grader-bench-side-") as scratch:
        folder = Path(scratch) / "class"
        folder.mkdir()
        make_class(folder, exercise, args.count)
        if args.grade:
            print(f"{args.count} submissions of {exercise.slug}, tier {args.tier}, {args.sandbox} sandbox, "
                  f"one `grader grade` at a time from each checkout in turn, {args.pairs} rounds")
            cpu_ratios, wall_ratios = [], []
            for number in range(args.pairs):
                cpu, wall = in_turn([ROOT, other], folder, args, number)
                cpu_ratios.append(cpu[0] / cpu[1])
                wall_ratios.append(wall[0] / wall[1])
                print(f"  round {number + 1}: this checkout {cpu[0] / args.count:.3f} s of CPU and {wall[0] / args.count:.3f} s "
                      f"wall a grading, {other} {cpu[1] / args.count:.3f} s and {wall[1] / args.count:.3f} s")
            print(f"  this checkout / {other}: {statistics.median(cpu_ratios):.3f} of the CPU "
                  f"({min(cpu_ratios):.3f}-{max(cpu_ratios):.3f}), {statistics.median(wall_ratios):.3f} of the wall "
                  f"time ({min(wall_ratios):.3f}-{max(wall_ratios):.3f}), medians of the rounds")
            return
        print(f"{args.count} submissions of {exercise.slug}, tier {args.tier}, {args.sandbox} sandbox, "
              f"`grader batch --jobs 1` in each checkout at the same time, {args.pairs} pairs")
        ratios = []
        for number in range(args.pairs):
            # Which one starts first alternates, so that neither always gets the head start.
            order = [ROOT, other] if number % 2 == 0 else [other, ROOT]
            used, wall = pair(order, folder, args, Path(scratch), number)
            found = dict(zip(order, used))
            this_cpu, other_cpu = found[ROOT], found[other]
            ratios.append(this_cpu / other_cpu)
            print(f"  pair {number + 1} ({wall:.0f} s): this checkout {this_cpu:.1f} s of CPU, {other} "
                  f"{other_cpu:.1f} s, ratio {this_cpu / other_cpu:.3f}")
        print(f"  this checkout / {other}: {statistics.median(ratios):.3f} of the CPU (median of the pairs; "
              f"{min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
