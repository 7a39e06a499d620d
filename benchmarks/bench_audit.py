"""Benchmark: how many mutants `grader audit` grades a minute, against the floor, in one run.

The audit grades the exercise's own mutants and every mutant it makes from the reference, each as a
submission in a confinement of its own, on up to `--seeds` seeds (a mutant a seed-independent test
catches is graded once). Beside it, the floor: the suites' tests called in one warm process for each of
the same mutants on its own seed (`benchmarks/floor.py`), the tests' own work. A mutant whose tests run
into a time limit is left out of the floor (the floor has no time limits: it would wait for ever); the
audit grades it, and pays its timeouts.

Each case runs in a cgroup of its own, the two alternating over `--rounds` (a first round, not counted,
warms the caches), and prints CPU a mutant, its multiple of the floor, wall a mutant and mutants a minute.

    python -m benchmarks.bench_audit [--exercise paged_kv_cache] [--rounds 1] [--jobs 2] [--seeds 3]
                                     [--project DIR]

Needs root (it makes cgroups) and the local sandbox (bubblewrap).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.cpu import Measured, alternate, cgroups_writable, run_in_group, table
from grader.core.exercise import load_exercise

ROOT = Path(__file__).resolve().parent.parent

# The audit case: one whole audit in a fresh Python, printing what it graded (the figures' count).
AUDIT = """
import json, sys
from grader.audit.audit import run_audit
from grader.core.exercise import load_exercise
from grader.sandbox.choose import choose_backend
exercise = load_exercise(sys.argv[1])
backend = choose_backend("local")
audit = run_audit(exercise, backend, "local", seeds=int(sys.argv[2]), jobs=int(sys.argv[3]),
                  make_backend=lambda: choose_backend("local", warm=True))
rows = [*audit.mutants, *audit.generated]
looping = [row.label for row in rows if any(t.status == "timeout" for t in row.card.tests)]
print(json.dumps({"mutants": len(rows), "gradings": sum(len(row.cards) + len(row.other_cards) for row in rows) + 2,
                  "survivors": len(audit.survivors), "looping": looping}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercise", default="paged_kv_cache")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--project", type=Path, default=ROOT, help="the project folder holding the exercise")
    args = parser.parse_args()
    if not cgroups_writable():
        raise SystemExit("this benchmark makes a cgroup per case: run it as root on a writable /sys/fs/cgroup")
    from grader.audit.mutate import generate_mutants

    exercise = load_exercise(args.exercise, args.project.resolve())
    made = generate_mutants(exercise.reference.read_text(encoding="utf-8"))
    folder = Path(tempfile.mkdtemp(prefix="grader-bench-audit-"))
    printed: dict[str, object] = {}
    try:
        files = {f"own_{path.stem}": path.read_bytes() for path in exercise.mutants}
        files |= {f"made_{k:04d}": mutant.source.encode() for k, mutant in enumerate(made)}
        labels = {f"mutant {path.stem}": f"own_{path.stem}" for path in exercise.mutants}
        labels |= {mutant.name: f"made_{k:04d}" for k, mutant in enumerate(made)}

        def measure(case: str, round_number: int) -> Measured:
            name = f"grader-bench-{os.getpid()}-{round_number}-{case}"
            if case == "audit":
                measured, out = run_in_group(name, lambda group: [
                    sys.executable, "-c", AUDIT, str(exercise.folder), str(args.seeds), str(args.jobs)],
                    cwd=ROOT)
                found = json.loads(out)
                printed.update(found)
                # The floor grades what ends: the mutants the audit saw loop are taken out of its class.
                for label in found["looping"]:
                    (folder / f"{labels[label]}.py").unlink(missing_ok=True)
                return measured
            class_files = sorted(folder.glob("*.py"))
            _, out = run_in_group(name, lambda group: [
                sys.executable, "-m", "benchmarks.floor", "--exercise", str(exercise.folder),
                "--tier", exercise.top_tier, *map(str, class_files)], cwd=ROOT)
            found = json.loads(out)
            # Per mutant of the floor's class, scaled to the audit's count so the two read alike.
            scale = (len(files)) / len(class_files)
            return Measured(sum(found["cpu_s"].values()) * scale, sum(found["wall_s"].values()) * scale)

        for stem, data in files.items():
            (folder / f"{stem}.py").write_bytes(data)
        # The audit first: its warm-up round finds the mutants that loop before the floor meets them.
        series = alternate(["audit", "floor"], args.rounds, measure)
        count = len(files)
        print(f"{exercise.slug}: {len(exercise.mutants)} own mutants and {len(made)} made from the reference, "
              f"up to {args.seeds} seeds each, --jobs {args.jobs}, {args.rounds} rounds alternating (medians; a "
              f"warm-up round not counted), CPU from each case's own cgroup")
        print(f"  the audit graded {printed['gradings']} times; {len(printed['looping'])} mutants ran into a time "
              f"limit and are not in the floor's class (its figure is scaled to {count} mutants); "
              f"{printed['survivors']} survivors")
        for line in table(series, "floor", count, "a mutant"):
            print(line)
        wall = series["audit"].median_wall()
        print(f"  audit: {count / wall * 60:.0f} mutants a minute ({wall:.1f} s for {count})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
