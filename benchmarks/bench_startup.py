"""Benchmark: `grader grade` as a user runs it, against a fresh pytest of the same suite (the floor of a
single grading: one Python, one pytest start, the same tests against the same file).

Cases, alternating in every round, each a subprocess; a case's CPU is its own processes' (the deltas of
`resource.getrusage(RUSAGE_CHILDREN)` around it, which count every descendant that was waited for),
never the machine's:

  grade    `grader grade SUBMISSION --exercise E --sandbox local --tier T`, the whole command (the
           console script's code, run from this checkout)
  pytest   a fresh `python -m pytest -p grader.harness.inprocess` of the tier's suites, the
           submission imported into pytest itself, with the seed the grader gives it; the suites'
           bytecode kept in their `__pycache__` from the round before, as any pytest run after the
           first finds it (the floor `grade` is held to: its harness gets the suites compiled too)
  cold     the same pytest compiling the suites afresh (their `__pycache__` removed, none written), as
           a first run does (only the suites' bytecode is removed, not the checkout's own)
  import   `python -c "import grader.cli"`: what the command line costs before any command runs
  before   with `--before DIR`: the same `grade` run from another checkout (an older commit's worktree),
           so that a change is measured against what it changed in the same rounds

    python -m benchmarks.bench_startup [--rounds 7] [--exercise continuous_batching] [--tier premium]
                                       [--submission FILE] [--before DIR] [--pause 0]

The cases run in a new order each round, the files written so far synced before each; `--pause S` rests
the machine S seconds before each case too.

Prints each round, then the medians and the ratios of `grade` (and `before`) to `pytest` in wall and in
CPU time, and the ratios taken within each round (median and quartiles): the cases of a round ran
seconds apart, so these hold when the machine's speed drifts between spells.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ("grade", "pytest", "cold", "import", "before")


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> Run:
    """Wall and CPU time of one subprocess (its descendants included), which must exit 0."""
    cpu, started = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env)
    run = Run(time.perf_counter() - started, children_cpu() - cpu)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])}... exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return run


def grader_command(checkout: Path = ROOT) -> list[str]:
    """What the `grader` console script runs, started from `checkout`: an installed script imports the
    checkout it was installed from, which may be another one (a `git worktree`). A checkout older than
    the command's own start (`grader/__main__.py`) is run as its script ran it."""
    if not (checkout / "grader" / "__main__.py").exists():
        return [sys.executable, "-c", "import sys; from grader.cli import main; sys.exit(main())"]
    return [sys.executable, "-c", "import sys; from grader.__main__ import run; sys.exit(run())"]


Case = tuple[list[str], dict[str, str] | None, Path]

# `python -m pytest ARGS` once the bytecode of the suites is gone: `python -c COLD SUITE... -- ARGS`. Only
# the suites' folders are cleared: the checkout's own bytecode (the `grade` case's) stays.
COLD = ("import os, runpy, shutil, sys; cut = sys.argv.index('--'); "
        "[shutil.rmtree(os.path.join(root, '__pycache__')) for folder in sys.argv[1:cut] "
        "for root, dirs, _ in os.walk(folder) if '__pycache__' in dirs]; "
        "sys.argv = ['pytest', *sys.argv[cut + 1:]]; runpy.run_module('pytest', run_name='__main__')")


def commands(exercise_slug: str, tier: str, submission: Path, before: Path | None = None) -> dict[str, Case]:
    """Each case's command line and environment."""
    from grader.core.exercise import load_exercise
    from grader.core.seeding import seed_for_source
    from grader.sandbox.interpreter import HARNESS_ENV

    exercise = load_exercise(exercise_slug, ROOT)
    tier = exercise.tier(tier)
    options = ["grade", str(submission), "--exercise", exercise_slug, "--sandbox", "local", "--tier", tier]
    grade = [*grader_command(), *options]
    suites = [str(spec.path) for spec in exercise.suites_for(tier)]
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "grader.harness.inprocess", "-p", "no:cacheprovider",
              "-c", os.devnull, "--rootdir", str(ROOT), *suites]
    env = {**HARNESS_ENV, "GRADER_SUBMISSION": str(submission), "GRADER_REFERENCE": str(exercise.reference),
           "GRADER_SEED": str(seed_for_source(submission.read_bytes(), exercise)), "PYTHONPATH": str(ROOT)}
    cold = [sys.executable, "-c", COLD, *suites, "--", *pytest[3:]]
    # The command's own modules are read from their bytecode, as an installed package's are (and as
    # pytest's are in the floor), whatever this shell says.
    own = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    cases = {"grade": (grade, own, ROOT), "pytest": (pytest, env, ROOT),
             "cold": (cold, {**env, "PYTHONDONTWRITEBYTECODE": "1"}, ROOT),
             "import": ([sys.executable, "-c", "import grader.cli"], own, ROOT)}
    if before is not None:  # `python -c` puts the current folder first on the path: that checkout's grader
        cases["before"] = ([*grader_command(before), *options], own, before)
    return cases


def report(runs: dict[str, list[Run]]) -> None:
    print(f"\n{'case':<8} {'wall (median)':>14} {'CPU (median)':>13}   over {len(runs['grade'])} rounds")
    medians = {case: Run(statistics.median(r.wall_s for r in found), statistics.median(r.cpu_s for r in found))
               for case, found in runs.items()}
    for case, run in medians.items():
        print(f"{case:<8} {run.wall_s:>12.3f} s {run.cpu_s:>11.3f} s")
    for floor_case in ("pytest", "cold"):
        floor = medians[floor_case]
        for case in ("grade", "before"):
            if case in medians:
                run = medians[case]
                print(f"{case} / {floor_case}: {run.wall_s / floor.wall_s:.2f}x the wall time, "
                      f"{run.cpu_s / floor.cpu_s:.2f}x the CPU")
    # The machine's speed drifts from one spell to the next: a ratio taken within each round, where the
    # cases ran seconds apart, is steadier than the ratio of medians taken over all of them.
    print("round by round (median, quartiles of the ratios within each round, wall time):")
    for case, floor_case in (("grade", "pytest"), ("before", "pytest"), ("grade", "before")):
        if case in runs and floor_case in runs:
            ratios = [a.wall_s / b.wall_s for a, b in zip(runs[case], runs[floor_case])]
            low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            print(f"  {case} / {floor_case}: {statistics.median(ratios):.2f}x ({low:.2f}x to {high:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="counted rounds, after one not counted (warms caches)")
    parser.add_argument("--exercise", default="continuous_batching")
    parser.add_argument("--tier", default="premium")
    parser.add_argument("--submission", type=Path, help="the file graded (default: the exercise's reference)")
    parser.add_argument("--before", type=Path, help="another checkout whose `grade` is measured beside this one's")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds of rest before each case (after the files written so far are synced): each "
                             "case then starts on an idle machine rather than straight after the one before")
    args = parser.parse_args()
    from grader.core.exercise import load_exercise

    reference = ROOT / "solutions" / args.exercise / load_exercise(args.exercise, ROOT).submission_file
    submission = (args.submission or reference).resolve()
    cases = commands(args.exercise, args.tier, submission, args.before.resolve() if args.before else None)
    names = [case for case in CASES if case in cases]
    runs: dict[str, list[Run]] = {case: [] for case in names}
    shuffled = random.Random(0)
    for round_number in range(args.rounds + 1):
        # Alternating cases, in a new order each round, so that a slow spell of the machine falls on all and
        # no case always comes after the same one: a command that keeps both cores busy starts faster just
        # after another such command than after one that left a core idle (this machine's cores wake up).
        order = shuffled.sample(names, len(names))
        measured = {}
        for case in order:
            os.sync()
            time.sleep(args.pause)
            measured[case] = timed(*cases[case])
        if round_number == 0:
            continue
        for case, run in measured.items():
            runs[case].append(run)
        print(f"round {round_number}: " + "  ".join(f"{case} {run.wall_s:.3f} s wall, {run.cpu_s:.3f} s CPU"
                                                   for case, run in measured.items()), flush=True)
    report(runs)


if __name__ == "__main__":
    main()
