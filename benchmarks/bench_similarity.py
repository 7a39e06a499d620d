"""Benchmark: time and memory of `grader similarity` for a class of 200 and of 1,000 submissions, how it
grows, against the floor, side by side with other tools' own command lines where they are installed.

Makes a class of N files from the project's own solutions (the honest class of tests/similarity_class/,
the reference, every mutant), each made distinct as students make theirs: names renamed, comments and
blank lines added at random (the same seed every run). Then, in alternating rounds, each case in a
cgroup of its own (its CPU is its own process tree's, never the machine's):

  floor        every file read and tokenized once in one warm process: the least any token-based
               comparison spends
  grader       `grader similarity FOLDER --exercise continuous_batching --json FILE`, as a user runs it
  copydetect   `copydetect -t FOLDER -b STUB_FOLDER -e py -a ...` (MOSS's winnowing, numpy), if installed
  compare50    `compare50 FOLDER/* -d STUB ...` (CS50's), if installed

Each is printed as CPU and wall a run, its peak memory (the largest process's resident set) and a
multiple of the floor. copydetect and compare50 are found on PATH or given with --tool NAME=EXECUTABLE
(a venv of their own keeps their dependencies out of the project's).

    python -m benchmarks.bench_similarity [--sizes 200,1000] [--rounds 3] [--tool copydetect=/venv/bin/copydetect]

Needs root (it makes cgroups).
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.cpu import Measured, alternate, cgroups_writable, run_in_group
from grader.core.exercise import load_exercise

ROOT = Path(__file__).resolve().parent.parent

EXERCISE = "continuous_batching"
CLASS = ROOT / "tests" / "similarity_class"
# A wrapper that runs a command and prints the peak resident set of its largest process, in KiB.
PEAK = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(done.returncode)")
FLOOR = ("import sys; from pathlib import Path; from grader.similarity.tokens import python_tokens; "
         "[python_tokens(p.read_text(errors='replace')) for p in sorted(Path(sys.argv[1]).glob('*.py'))]")
RENAMES = ("req", "plan", "left", "head", "need", "n", "rest", "emitted", "budget", "r")


def disguised(text: str, chance: random.Random, number: int) -> str:
    for name in chance.sample(RENAMES, 4):
        text = re.sub(rf"\b{name}\b", f"{name}_{chance.randrange(1000)}", text)
    lines = text.splitlines()
    for _ in range(chance.randrange(2, 6)):
        spot = chance.randrange(len(lines))
        indent = re.match(r"\s*", lines[spot]).group()  # type: ignore[union-attr]
        lines.insert(spot, indent + chance.choice(("", f"# note {number}", "# step", "")))
    return "\n".join(lines) + f"\n# {number}\n"


def make_class(folder: Path, count: int) -> None:
    exercise = load_exercise(EXERCISE)
    bases = [*sorted(CLASS.glob("*.py")), exercise.reference, *exercise.mutants]
    chance = random.Random(20261203)
    for number in range(count):
        text = bases[number % len(bases)].read_text()
        (folder / f"s{number:04d}.py").write_text(disguised(text, chance, number))


def commands(case: str, folder: Path, out: Path, tools: dict[str, str]) -> list[str]:
    stub = str(load_exercise(EXERCISE).stub)
    if case == "floor":
        return [sys.executable, "-c", FLOOR, str(folder)]
    if case == "grader":
        return [sys.executable, "-m", "grader.cli", "similarity", str(folder), "--exercise", EXERCISE,
                "--json", str(out / "grader.json")]
    if case == "copydetect":  # its boilerplate is a folder: the stub alone in one
        given = out / "given"
        given.mkdir(exist_ok=True)
        shutil.copy(stub, given / Path(stub).name)
        return [tools[case], "-t", str(folder), "-b", str(given), "-e", "py", "-a", "-O", str(out / "copydetect.html")]
    if case == "compare50":
        return [tools[case], *sorted(str(p) for p in folder.glob("*.py")), "-d", stub, "-o", str(out / "compare50"),
                "-n", "50"]
    raise ValueError(case)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200,1000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tool", action="append", default=[], metavar="NAME=EXECUTABLE")
    args = parser.parse_args()
    if not cgroups_writable():
        raise SystemExit("needs write access to the cgroup hierarchy (run as root)")
    tools = {name: shutil.which(name) or "" for name in ("copydetect", "compare50")}
    tools.update(dict(item.split("=", 1) for item in args.tool))
    cases = ["floor", "grader", *(name for name, path in tools.items() if path)]
    for name, path in tools.items():
        if not path:
            print(f"{name}: not installed (give --tool {name}=EXECUTABLE): left out")
    growth: dict[str, list[tuple[int, float]]] = {case: [] for case in cases}
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as scratch:
            folder, out = Path(scratch) / "class", Path(scratch) / "out"
            folder.mkdir()
            out.mkdir()
            make_class(folder, size)
            peaks: dict[str, int] = {}

            def measure(case: str, number: int, folder: Path = folder, out: Path = out,
                        peaks: dict[str, int] = peaks) -> Measured:
                shutil.rmtree(out / "compare50", ignore_errors=True)
                result, printed = run_in_group(f"bench-similarity-{case}-{number}", lambda group: [
                    sys.executable, "-c", PEAK, *commands(case, folder, out, tools)], cwd=ROOT)
                peaks[case] = max(peaks.get(case, 0), int(printed.split()[-1]))
                return result

            series = alternate(cases, args.rounds, measure)
            floor = series["floor"].median_cpu()
            print(f"\n{size} submissions, {args.rounds} rounds (medians; peak memory of the largest process):")
            for case, found in series.items():
                growth[case].append((size, found.median_wall()))
                print(f"  {case:10s}  CPU {found.median_cpu():7.2f} s ({found.spread_cpu()}), "
                      f"{found.median_cpu() / floor:6.1f}x the floor, wall {found.median_wall():7.2f} s, "
                      f"peak {peaks[case] / 1024:6.0f} MiB")
    sizes = [s for s, _ in growth["grader"]]
    if len(sizes) == 2:
        print(f"\ngrowth from {sizes[0]} to {sizes[1]} submissions ({sizes[1] / sizes[0]:.0f}x the files, "
              f"{(sizes[1] / sizes[0]) ** 2:.0f}x the pairs), wall:")
        for case, points in growth.items():
            print(f"  {case:10s}  {points[1][1] / points[0][1]:5.1f}x")


if __name__ == "__main__":
    main()
