"""Benchmark: how many mutants `grader audit` grades a minute, against the floor, in one run.

The audit grades the exercise's own mutants and every mutant it makes from the reference, each as a
submission in a confinement of its own, on up to `--seeds` seeds (a mutant a seed-independent test
catches is graded once; a made mutant is graded until a named test catches it, its calls cut short).
Beside it, the floor: the suites' tests called in one warm process for each of the same mutants on its
own seed (`benchmarks/floor.py`), every test, the tests' own work. A mutant whose tests run into a time
limit is left out of the floor (the floor has no time limits: it would wait for ever); the audit grades
it, and pays its timeouts.

Each case runs in a cgroup of its own, the two alternating over `--rounds` (a first round, not counted,
warms the caches), and prints CPU a mutant, its multiple of the floor, wall a mutant, mutants a second,
and the wall time the audit's CPU needs at the least on the machine's cores (what an idle machine would
take were every core busy the whole time), beside the figures before: as reported, and 0.12.0's.
With `--sandbox docker` the audit grades in Docker, its containers placed under the case's cgroup, so
their CPU is counted with it (the engine's own processes are not).

    python -m benchmarks.bench_audit [--exercise paged_kv_cache] [--rounds 1] [--jobs 2] [--seeds 3]
                                     [--sandbox local|docker] [--project DIR]

Needs root (it makes cgroups) and the local sandbox (bubblewrap), or a Docker engine.
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
sandbox, parent = sys.argv[4], sys.argv[5]
def make(warm):
    backend = choose_backend(sandbox, warm=warm)
    if sandbox == "docker":
        backend.cgroup_parent = parent  # the containers' CPU counts in the case's own group
    return backend
audit = run_audit(exercise, make(False), sandbox, seeds=int(sys.argv[2]), jobs=int(sys.argv[3]),
                  make_backend=lambda: make(True))
rows = [*audit.mutants, *audit.generated]
looping = [row.label for row in rows if any(t.status == "timeout" for t in row.card.tests)]
print(json.dumps({"mutants": len(rows), "gradings": sum(len(row.cards) + len(row.other_cards) for row in rows) + 2,
                  "survivors": len(audit.survivors), "looping": looping}))
"""


# What the audit took before: as an issue reported it (a 2-core machine other work shared), and 0.12.0
# measured with this benchmark on the same 2-core machine, idle.
BEFORE = {
    ("continuous_batching", "local"): [
        "as reported: 206 mutants (46 own, 160 made) in 1 min 53 s: 1.82 mutants a second",
        "0.12.0: 229 mutants (49 own, 180 made) in 185.7 s: 1.23 mutants a second, 281.5 s of CPU"],
    ("continuous_batching", "docker"): [
        "as reported: 34 mutants in 62-164 s against 26 s on the local sandbox (2.5-3x): 0.21-0.55 mutants a second",
        "0.12.0: 229 mutants in 200.8 s: 1.14 mutants a second, 293.8 s of CPU"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercise", default="paged_kv_cache")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--sandbox", choices=("local", "docker"), default="local")
    parser.add_argument("--project", type=Path, default=ROOT, help="the project folder holding the exercise")
    args = parser.parse_args()
    if not cgroups_writable():
        raise SystemExit("this benchmark makes a cgroup per case: run it as root on a writable /sys/fs/cgroup")
    from grader.audit.audit import made_mutants

    exercise = load_exercise(args.exercise, args.project.resolve())
    # The audit's own mutants: those made from the reference and from each correct variant.
    made = made_mutants({"": exercise.reference, **{path.stem: path for path in exercise.variants}})
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
                    sys.executable, "-c", AUDIT, str(exercise.folder), str(args.seeds), str(args.jobs),
                    args.sandbox, group.parent_for_containers], cwd=ROOT)
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
        print(f"{exercise.slug}: {len(exercise.mutants)} own mutants and {len(made)} made from the reference and "
              f"its variants, up to {args.seeds} seeds each, the {args.sandbox} sandbox, --jobs {args.jobs}, "
              f"{args.rounds} rounds alternating (medians; a warm-up round not counted), CPU from each case's "
              "own cgroup")
        print(f"  the audit graded {printed['gradings']} times; {len(printed['looping'])} mutants ran into a time "
              f"limit and are not in the floor's class (its figure is scaled to {count} mutants); "
              f"{printed['survivors']} survivors")
        for line in table(series, "floor", count, "a mutant"):
            print(line)
        wall, cpu = series["audit"].median_wall(), series["audit"].median_cpu()
        cores = os.cpu_count() or 1
        print(f"  audit: {count / wall:.2f} mutants a second, {count / wall * 60:.0f} a minute ({wall:.1f} s for "
              f"{count}); its CPU ({cpu:.1f} s) needs {cpu / cores:.1f} s at the least on {cores} cores")
        for before in BEFORE.get((exercise.slug, args.sandbox), []):
            print(f"  before: {before}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
