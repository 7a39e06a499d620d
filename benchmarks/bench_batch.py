"""Benchmark: CPU a submission of every way of grading a class, against the floor, in one run.

Makes a class of N submissions (the reference, every mutant, the stub, in turn, each made distinct) and
grades it, case after case in alternating rounds, each case in a cgroup of its own so that its figure is
the CPU of its own processes (and of the containers it caused), never the machine's:

  floor       the suites' tests called in one warm process, each submission imported once
              (`benchmarks/floor.py`): the tests' own work, what no grader can spend less than
  in-process  each submission in a fresh `pytest -p grader.harness.inprocess`: no isolation at all
  grade       each submission through `grader grade --sandbox local`, as a user runs it
  local       `grader batch`'s grading, a warm local sandbox per job
  docker-run  each in a throwaway `docker run` of the in-process suites, as a Gradescope-style grader does
  docker      `grader batch`'s grading with the Docker sandbox

Every case grades with the seeds the grader gives each submission, so all do the same work. Each is
printed as CPU and wall a submission and as a multiple of the floor. The Docker engine's own processes
(dockerd, containerd, shims) are not in any case's group: their CPU is printed apart, and it counts
whatever else the engine runs meanwhile.

    python -m benchmarks.bench_batch [--count 40] [--rounds 3] [--jobs 1] [--tier premium]
                                     [--cases floor,in-process,grade,local,docker-run,docker]

Needs root (it makes cgroups). Docker cases are left out, with a note, where no engine answers.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cpu import Measured, alternate, cgroups_writable, run_in_group, table
from benchmarks.run_case import CASES
from grader.core.exercise import load_exercise

ROOT = Path(__file__).resolve().parent.parent

ALL_CASES = ("floor", *CASES)


# A class of every kind of submission in turn, of copies of the reference, or of copies of the stub (whose
# tests all fail at their first call: what a submission costs before its tests' own work).
KINDS = ("mixed", "reference", "stub")


def make_class(folder: Path, exercise, count: int, kind: str = "mixed") -> None:
    pool = {"mixed": [exercise.reference, *exercise.mutants, exercise.stub], "reference": [exercise.reference],
            "stub": [exercise.stub]}[kind]
    sources = itertools.cycle(pool)
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


def measure_case(case: str, folder: Path, args: Comparison, round_number: int) -> Measured:
    """One run of `case` over the class, in a cgroup of its own. The floor counts its process's own CPU
    of the tests' calls (its start and collection are not the tests' work); the others their group's."""
    name = f"grader-bench-{os.getpid()}-{round_number}-{case}"
    if case == "floor":
        _, printed = run_in_group(name, lambda group: [
            sys.executable, "-m", "benchmarks.floor", "--exercise", args.exercise, "--tier", args.tier,
            *map(str, sorted(folder.glob("*.py")))], cwd=ROOT)
        found = json.loads(printed)
        return Measured(sum(found["cpu_s"].values()), sum(found["wall_s"].values()))
    measured, _ = run_in_group(name, lambda group: [
        sys.executable, "-m", "benchmarks.run_case", case, str(folder), "--exercise", args.exercise,
        "--tier", args.tier, "--jobs", str(args.jobs), "--cgroup-parent", group.parent_for_containers], cwd=ROOT)
    return measured


@dataclass
class Comparison:
    """What a grading benchmark compares: which cases, over what class, how many times."""

    cases: list[str]
    count: int = 40
    rounds: int = 3
    jobs: int = 1
    tier: str = "premium"
    exercise: str = "continuous_batching"
    kind: str = "mixed"


def compare(args: Comparison) -> None:
    """Grade one class every way of `args.cases` (the floor always first), in alternating rounds, each
    case in a cgroup of its own; print each against the floor."""
    cases = list(args.cases)
    unknown = sorted(set(cases) - set(ALL_CASES))
    if unknown:
        raise SystemExit(f"unknown cases: {', '.join(unknown)} (known: {', '.join(ALL_CASES)})")
    if not cgroups_writable():
        raise SystemExit("this benchmark makes a cgroup per case: run it as root on a writable /sys/fs/cgroup")
    if any("docker" in case for case in cases):
        from grader.sandbox.engine import engine_client
        if engine_client() is None:
            print("no Docker engine answers: the Docker cases are left out (start one with .ci/docker-up.sh)")
            cases = [case for case in cases if "docker" not in case]
    if "floor" not in cases:
        cases.insert(0, "floor")  # every figure is read against it
    exercise = load_exercise(args.exercise, ROOT)
    folder = Path(tempfile.mkdtemp(prefix="grader-bench-class-"))
    try:
        make_class(folder, exercise, args.count, args.kind)
        made_of = (f"reference, {len(exercise.mutants)} mutants, stub" if args.kind == "mixed"
                   else f"copies of the {args.kind}")
        print(f"{args.count} submissions of {exercise.slug} ({made_of}), tier {args.tier}, --jobs {args.jobs}, "
              f"{args.rounds} rounds alternating (medians; a warm-up round not counted), CPU from each case's "
              f"own cgroup")
        engine: dict[str, list[float]] = {case: [] for case in cases}

        def measure(case: str, round_number: int) -> Measured:
            before = engine_cpu_seconds()
            measured = measure_case(case, folder, args, round_number)
            engine[case].append(engine_cpu_seconds() - before)
            return measured

        series = alternate(cases, args.rounds, measure)
        for line in table(series, "floor", args.count):
            print(line)
        for case in cases:
            if "docker" in case:
                used = sorted(engine[case])[len(engine[case]) // 2]
                print(f"  {case}: the engine's own processes, besides: {used / args.count:.3f} s a submission")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def arguments(description: str, cases: tuple[str, ...], count: int, kind: str) -> Comparison:
    """The options every grading benchmark takes, with its own defaults."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--count", type=int, default=count)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--tier", default="premium")
    parser.add_argument("--cases", default=",".join(cases))
    parser.add_argument("--exercise", default="continuous_batching")
    parser.add_argument("--class", dest="kind", choices=KINDS, default=kind,
                        help="every kind of submission in turn, copies of the reference, or of the stub")
    args = parser.parse_args()
    return Comparison([case.strip() for case in args.cases.split(",") if case.strip()], args.count, args.rounds,
                      args.jobs, args.tier, args.exercise, args.kind)


def main() -> None:
    compare(arguments(__doc__.split("\n\n")[0], ("floor", "in-process", "grade", "local", "docker-run", "docker"),
                      40, "mixed"))


if __name__ == "__main__":
    main()
