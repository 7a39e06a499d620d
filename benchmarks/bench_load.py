"""Benchmark: one class graded on an idle machine and beside a CPU hog, alternating; the scores must agree.

The class: the reference, correct solutions in other styles (tests/solutions/, each appended to the
reference) and mutants of the exercise. Each round grades it with `grader batch --jobs 2` into a
fresh store, in a cgroup of its own, alternately on the idle machine and beside a hog (busy-looping
processes at nice 0, twice as many as cores, outside that cgroup). It prints the wall time and the
CPU time of each round (the batch's cgroup: the grader, its harnesses and workers, never the hog), and
exits 1, naming the submissions, if any scorecard differs from one round to another (status, score, or
any test's result).

    python -m benchmarks.bench_load [--rounds 2] [--styles 4] [--mutants 6] [--sandbox local]

CPU is read from a cgroup (v2, or v1's cpuacct controller): run it as root. Without one, from the
batch process's rusage, which misses processes that were not its descendants when they ended (a
Docker container's are the engine's: with `--sandbox docker` either way counts the host side only).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.bench_side_by_side import CpuGroup
from grader.core.exercise import Exercise, load_exercise
from grader.course.store import Store

ROOT = Path(__file__).resolve().parent.parent

SOLUTIONS = ROOT / "tests" / "solutions"
# slow_calls sleeps past a random-workload test's 60 s on the top tier even on an idle machine.
NOT_CORRECT = {"endless_in_one_case", "crash_in_one_case", "slow_calls"}
HOGS_PER_CORE = 2
HOG_BOUND_S = 3600  # a hog left behind (this benchmark killed) stops by itself, or when its parent is gone
HOG = """
import os, sys, time
try:
    os.setpriority(os.PRIO_PROCESS, 0, 0)
except PermissionError:
    pass
parent, end = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < end and os.getppid() == parent:
    for _ in range(200_000):
        pass
"""


def make_class(folder: Path, exercise: Exercise, styles: int, mutants: int) -> None:
    reference = exercise.reference.read_bytes()
    (folder / "reference.py").write_bytes(reference)
    style_folder = SOLUTIONS if exercise.slug == "continuous_batching" else SOLUTIONS / exercise.slug
    found = [p for p in sorted(style_folder.glob("*.py")) if p.stem not in NOT_CORRECT]
    for path in found[:styles]:
        (folder / f"style-{path.stem.replace('_', '-')}.py").write_bytes(reference + b"\n\n" + path.read_bytes())
    chosen = exercise.mutants
    step = max(1, len(chosen) // max(1, mutants))  # spread over the list: mutants of every kind of mistake
    for path in chosen[::step][:mutants]:
        (folder / f"mutant-{path.stem.replace('_', '-')}.py").write_bytes(path.read_bytes())


@contextmanager
def cpu_hog() -> Iterator[None]:
    hogs = [subprocess.Popen([sys.executable, "-c", HOG, str(os.getpid()), str(HOG_BOUND_S)],
                             stdin=subprocess.DEVNULL, start_new_session=True)
            for _ in range(HOGS_PER_CORE * (os.cpu_count() or 1))]
    try:
        time.sleep(0.5)  # every hog running before the batch starts
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


def cgroup(name: str) -> CpuGroup | None:
    try:
        return CpuGroup(name)
    except OSError:
        return None


def outcomes(db: Path, slug: str) -> dict[str, tuple]:
    """Per student: status, score, max score and every test's result."""
    with Store(db) as store:
        return {s.student: (s.card.status, s.card.score, s.card.max_score,
                            tuple(sorted((t.name, t.status) for t in s.card.tests)))
                for s in store.submissions(slug) if s.card is not None}


def graded_round(folder: Path, exercise: Exercise, args: argparse.Namespace, db: Path, number: int
                 ) -> tuple[float, float, str, dict[str, tuple]]:
    """(wall seconds, CPU seconds, where the CPU was read, outcomes) of one batch of the class."""
    argv = [sys.executable, "-m", "grader.cli", "batch", str(folder), "--exercise", exercise.slug,
            "--tier", args.tier or exercise.top_tier, "--jobs", str(args.jobs), "--sandbox", args.sandbox,
            "--db", str(db)]
    group = cgroup(f"grader-bench-load-{os.getpid()}-{number}")
    try:
        before = group.used() if group else 0.0
        started = time.perf_counter()
        process = subprocess.Popen(group.command(argv) if group else argv, cwd=ROOT, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        assert process.stderr is not None
        errors = process.stderr.read()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise SystemExit(f"the batch failed ({process.returncode}):\n{errors.decode(errors='replace')[-2000:]}")
        if group:
            cpu, source = group.used() - before, "cgroup"
        else:
            cpu, source = usage.ru_utime + usage.ru_stime, "rusage"
    finally:
        if group:
            group.remove()
    return wall, cpu, source, outcomes(db, exercise.slug)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each condition (idle, hog), alternating")
    parser.add_argument("--styles", type=int, default=4)
    parser.add_argument("--mutants", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--tier", default=None, help="default: the exercise's top tier")
    parser.add_argument("--sandbox", default="local", choices=["local", "docker"])
    parser.add_argument("--exercise", default="continuous_batching")
    args = parser.parse_args()
    exercise = load_exercise(args.exercise, ROOT)
    with tempfile.TemporaryDirectory(prefix="grader-bench-load-") as scratch:
        folder = Path(scratch) / "class"
        folder.mkdir()
        make_class(folder, exercise, args.styles, args.mutants)
        count = len(list(folder.glob("*.py")))
        print(f"{count} submissions of {exercise.slug} (the reference, {args.styles} styles, {args.mutants} mutants), "
              f"tier {args.tier or exercise.top_tier}, {args.sandbox} sandbox, `grader batch --jobs {args.jobs}`; "
              f"hog: {HOGS_PER_CORE * (os.cpu_count() or 1)} busy processes at nice 0 on {os.cpu_count()} cores")
        figures: dict[str, list[tuple[float, float]]] = {"idle": [], "hog": []}
        seen: list[tuple[str, int, dict[str, tuple]]] = []
        number = 0
        for round_number in range(args.rounds):
            # Which condition goes first alternates, so that neither always meets the machine's same hour.
            order = ["idle", "hog"] if round_number % 2 == 0 else ["hog", "idle"]
            for condition in order:
                number += 1
                db = Path(scratch) / f"round-{number}.db"
                if condition == "hog":
                    with cpu_hog():
                        wall, cpu, source, found = graded_round(folder, exercise, args, db, number)
                else:
                    wall, cpu, source, found = graded_round(folder, exercise, args, db, number)
                figures[condition].append((wall, cpu))
                seen.append((condition, number, found))
                print(f"  round {number} {condition:4s}: {wall:6.1f} s wall, {cpu:6.1f} s CPU ({source}), "
                      f"{cpu / count:.2f} s of CPU a submission")
        for condition, values in figures.items():
            walls, cpus = [w for w, _ in values], [c for _, c in values]
            print(f"  {condition:4s}: wall {statistics.median(walls):.1f} s (median; {min(walls):.1f}-{max(walls):.1f}), "
                  f"CPU {statistics.median(cpus):.1f} s ({min(cpus):.1f}-{max(cpus):.1f})")
        idle_wall = statistics.median(w for w, _ in figures["idle"])
        idle_cpu = statistics.median(c for _, c in figures["idle"])
        hog_wall = statistics.median(w for w, _ in figures["hog"])
        hog_cpu = statistics.median(c for _, c in figures["hog"])
        print(f"  beside the hog / idle: wall {hog_wall / idle_wall:.2f}x, CPU {hog_cpu / idle_cpu:.2f}x")
        print("  (no floor: the benchmarks have no helper that runs the tests' own work in one warm process)")
        first_condition, first_number, first = seen[0]
        differ: dict[str, list[str]] = {}
        for condition, round_number, found in seen[1:]:
            for student in sorted(set(first) | set(found)):
                if first.get(student) != found.get(student):
                    differ.setdefault(student, []).append(
                        f"round {first_number} ({first_condition}) {summary(first.get(student))}, "
                        f"round {round_number} ({condition}) {summary(found.get(student))}")
        if differ:
            print(f"scores differ between rounds for {len(differ)} of {count} submissions:")
            for student, lines in differ.items():
                for line in lines:
                    print(f"  {student}: {line}")
            raise SystemExit(1)
        print(f"  every scorecard identical in all {number} rounds")


def summary(outcome: tuple | None) -> str:
    if outcome is None:
        return "no scorecard"
    status, score, top, tests = outcome
    failed = [name for name, result in tests if result != "passed"]
    return f"{status} {score}/{top}" + (f" (not passed: {', '.join(failed)})" if failed else "")


if __name__ == "__main__":
    main()
