"""Benchmark: where a grading's CPU goes, by the part of the process tree that spends it.

Runs one case of `run_case.py` over a class (`local`: `grader batch`'s grading; `grade`: one `grader
grade` a submission; any other case it knows) in a cgroup of its own, under `perf record` (Debian's
linux-perf): CPU samples of every process, and every fork and exec, so that each sample is put down to
the role of the process that spent it:

  host                  the grader's own processes (the command, the batch or the service)
  isolation check       the host's check that bubblewrap can make namespaces here (once a process)
  harness               the harness started for the job (a batch's fork server; a single grading's first lane)
  harness, forked       harnesses forked from it (a batch's gradings, a single grading's second lane)
  bubblewrap            the namespaces' set-up
  zygote                the worker's fork server, one a confinement (a new Python each)
  loader                the process that imports the submission once and forks the workers
  worker                a test's worker (forked by the loader, or by the zygote until the loader is ready)
  other                 anything else the case started (a shell, the container engine's client...)

The case's CPU is its cgroup's (exact); each role's is its share of the samples times that. The floor
(the suites' tests called in one warm process, `floor.py`) is measured in the same run and printed
beside them, with each role as a multiple of it.

    python -m benchmarks.bench_roles [--case local] [--count 12] [--class reference] [--tier premium]

Needs root (a cgroup, system-wide sampling) and `perf`.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.bench_batch import KINDS, make_class
from benchmarks.cpu import CpuGroup, cgroups_writable, run_in_group
from benchmarks.run_case import CASES
from grader.core.exercise import load_exercise

ROOT = Path(__file__).resolve().parent.parent

ROLES = ("host", "isolation check", "harness", "harness, forked", "bubblewrap", "zygote", "loader", "worker",
         "other")
SAMPLES_A_SECOND = 1999
_EVENT = re.compile(r"\s*(\d+)\s+(\S+):\s*(.*)")


@dataclass
class Tree:
    """The processes a recording saw: who forked whom, what each executed, and each one's samples."""

    parent: dict[int, int] = field(default_factory=dict)
    executed: dict[int, str] = field(default_factory=dict)  # pid -> the last program it executed
    samples: collections.Counter[int] = field(default_factory=collections.Counter)
    kernel: collections.Counter[int] = field(default_factory=collections.Counter)

    def chain(self, pid: int) -> list[int]:
        """`pid` and its ancestors, nearest first."""
        found = [pid]
        while found[-1] in self.parent and len(found) < 64:
            found.append(self.parent[found[-1]])
        return found


def read_recording(data: Path) -> Tree:
    """The forks, executions and samples of a `perf record` file."""
    printed = subprocess.run(["perf", "script", "-i", str(data), "-F", "pid,event,trace,ip,dso"],
                             capture_output=True, text=True, check=True).stdout
    tree = Tree()
    for line in printed.splitlines():
        found = _EVENT.match(line)
        if not found:
            continue
        pid, event, rest = int(found.group(1)), found.group(2), found.group(3)
        if event == "sched:sched_process_fork":
            child = re.search(r"child_pid=(\d+)", rest)
            if child:
                tree.parent[int(child.group(1))] = pid
        elif event == "sched:sched_process_exec":
            program = re.search(r"filename=(\S+)", rest)
            if program:
                tree.executed[pid] = program.group(1)
        elif event.startswith("cpu-clock"):
            tree.samples[pid] += 1
            if "kernel" in rest:
                tree.kernel[pid] += 1
    return tree


@dataclass
class Roles:
    """The role of each process of a case, found from the shape of its tree (the namespaces isolation):
    each `bwrap` is started by a harness and runs a zygote, whose children are the loader (the one with
    children of its own) and workers; a `bwrap` whose Python forks nothing is the host's check that
    namespaces can be made. What no rule names is the host's (a Python) or other."""

    tree: Tree
    root: int
    of: dict[int, str] = field(default_factory=dict)
    parents: set[int] = field(default_factory=set)  # the processes that forked

    def __post_init__(self) -> None:
        tree, has_children = self.tree, self.parents
        has_children.update(tree.parent.values())
        for bwrap, program in tree.executed.items():
            if not program.endswith("/bwrap"):
                continue
            inside = [pid for pid, parent in tree.parent.items() if parent == bwrap and pid in tree.executed]
            if not any(pid in has_children for pid in inside):
                self.of.update(dict.fromkeys([bwrap, *inside], "isolation check"))
                continue
            self.of[bwrap] = "bubblewrap"
            self.of.update(dict.fromkeys(inside, "zygote"))
            harness = tree.parent.get(bwrap)
            while harness is not None and harness not in tree.executed:  # a harness forked from the started one
                self.of.setdefault(harness, "harness, forked")
                harness = tree.parent.get(harness)
            if harness is not None:
                self.of[harness] = "harness"

    def role(self, pid: int) -> str | None:
        """The role of `pid`; None for a process outside the case."""
        chain = self.tree.chain(pid)
        if self.root not in chain:
            return None
        for depth, ancestor in enumerate(chain):
            known = self.of.get(ancestor)
            if known == "zygote" and depth:
                return "loader" if depth == 1 and pid in self.parents else "worker"
            if known is not None:
                return known if depth == 0 or known != "harness" else "harness, forked"
            if ancestor in self.tree.executed:
                return "host" if "python" in self.tree.executed[ancestor].rsplit("/", 1)[-1] else "other"
        return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="local", choices=CASES)
    parser.add_argument("--count", type=int, default=12)
    parser.add_argument("--class", dest="kind", choices=KINDS, default="reference")
    parser.add_argument("--tier", default="premium")
    parser.add_argument("--exercise", default="continuous_batching")
    args = parser.parse_args()
    if not cgroups_writable() or shutil.which("perf") is None:
        raise SystemExit("this benchmark needs root (a cgroup) and perf (Debian: apt-get install linux-perf)")
    exercise = load_exercise(args.exercise, ROOT)
    folder = Path(tempfile.mkdtemp(prefix="grader-bench-roles-"))
    try:
        make_class(folder, exercise, args.count, args.kind)
        files = sorted(folder.glob("*.py"))
        _, printed = run_in_group(f"grader-bench-roles-{os.getpid()}-floor", lambda group: [
            sys.executable, "-m", "benchmarks.floor", "--exercise", args.exercise, "--tier", args.tier,
            *map(str, files)], cwd=ROOT)
        floor = sum(json.loads(printed)["cpu_s"].values()) / args.count
        per_role, workers, total = record(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    made_of = "every kind in turn" if args.kind == "mixed" else f"copies of the {args.kind}"
    print(f"{args.count} submissions of {exercise.slug} ({made_of}), tier {args.tier}, case {args.case}: CPU a "
          f"submission by role (the case's own cgroup, shared out by {SAMPLES_A_SECOND} samples a second)")
    print(f"  {'floor':16s} {floor:7.3f} s   1.00x the floor")
    for name in ROLES:
        seconds, kernel = per_role.get(name, (0.0, 0.0))
        if seconds:
            extra = f", {workers} workers" if name == "worker" else ""
            print(f"  {name:16s} {seconds / args.count:7.3f} s  {seconds / args.count / floor:5.2f}x the floor  "
                  f"(kernel {kernel:.0%}{extra})")
    print(f"  {'all of it':16s} {total / args.count:7.3f} s  {total / args.count / floor:5.2f}x the floor")


def record(args: argparse.Namespace, folder: Path) -> tuple[dict[str, tuple[float, float]], int, float]:
    """Run the case in a cgroup under perf; each role's CPU seconds and kernel share, the number of
    workers, and the case's CPU seconds in all."""
    group = CpuGroup(f"grader-bench-roles-{os.getpid()}")
    data = folder / "perf.data"
    try:
        before = group.used()
        perf = subprocess.Popen(
            # The case's processes only (the events follow its forks), with room for a busy machine's bursts.
            ["perf", "record", "-q", "-m", "1024", "-e", "cpu-clock", "-F", str(SAMPLES_A_SECOND), "-e",
             "sched:sched_process_fork", "-e", "sched:sched_process_exec", "-o", str(data), "--",
             *group.command([sys.executable, "-m", "benchmarks.run_case", args.case, str(folder),
                             "--exercise", args.exercise, "--tier", args.tier])],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        root = workload_of(perf.pid)
        _, said = perf.communicate()
        if perf.returncode != 0:
            raise SystemExit(f"the case failed under perf ({perf.returncode}):\n{said.decode()[-2000:]}")
        total = group.used() - before
    finally:
        group.remove()
    return shares(read_recording(data), root, total)


def workload_of(perf: int) -> int:
    """The process `perf record` started for the case (perf forks it before it records, so the recording
    has no fork event of it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{perf}/task/{perf}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.001)
    raise SystemExit("perf did not start the case")


def shares(tree: Tree, root: int, total: float) -> tuple[dict[str, tuple[float, float]], int, float]:
    roles = Roles(tree, root)
    counted: collections.Counter[str] = collections.Counter()
    kernel: collections.Counter[str] = collections.Counter()
    for pid, samples in tree.samples.items():
        name = roles.role(pid)
        if name is not None:
            counted[name] += samples
            kernel[name] += tree.kernel[pid]
    workers = sum(roles.role(pid) == "worker" for pid in tree.parent)
    whole = sum(counted.values()) or 1
    return ({name: (total * counted[name] / whole, kernel[name] / max(counted[name], 1)) for name in counted},
            workers, total)


if __name__ == "__main__":
    main()
