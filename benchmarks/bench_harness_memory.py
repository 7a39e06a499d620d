"""Benchmark: the largest process of a local grading (the harness or a worker), by submission.

The harness keeps copies of the attributes of every object a test holds; its bounds must keep it
small whatever a submission's objects look like. Each case is graded in a fresh Python process, and
the peak resident size of its largest descendant is printed (Linux's RUSAGE_CHILDREN ru_maxrss).

    python -m benchmarks.bench_harness_memory [--tier premium]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "reference": [ROOT / "solutions" / "continuous_batching" / "scheduler.py"],
    "2,000 properties of 4,000 characters on every Req": [
        ROOT / "solutions" / "continuous_batching" / "scheduler.py", ROOT / "tests" / "solutions" / "many_properties.py"],
    "a 20,000-entry plan, then a worker that stops reading": [ROOT / "tests" / "attacks" / "stop_reading.py"],
}
GRADE = """
import resource
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.sandbox.local import run_local
source = b"\\n\\n".join(open(p, "rb").read() for p in {paths!r})
card = grade_bytes(source, load_exercise("continuous_batching"), {tier!r}, run_local, "local")
print(card.score, card.max_score, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", default="premium")
    args = parser.parse_args()
    print(f"{'case':<56} {'score':>9} {'largest process':>16}")
    for name, paths in CASES.items():
        script = GRADE.format(paths=[str(p) for p in paths], tier=args.tier)
        # From the project's folder, which `python -c` puts first on the path: this checkout's `grader` and exercise.
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
        score, max_score, kib = done.stdout.split()[-3:]
        print(f"{name:<56} {score + '/' + max_score:>9} {int(kib) / 1024:>12.0f} MiB")


if __name__ == "__main__":
    main()
