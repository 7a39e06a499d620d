"""Benchmark: the local sandbox against the same suites unprotected, and against the floor.

Grades one class (copies of the reference by default, each made distinct, so each has its own seed)
every way the local sandbox can grade a single submission, in alternating rounds, each case in a cgroup
of its own (its CPU is that of its own processes, never the machine's), with the seed the grader gives
each submission:

  floor                the suites' tests called in one warm process (`floor.py`)
  in-process           a fresh `pytest -p grader.harness.inprocess` a submission: no isolation at all
  grade                `grader grade --sandbox local`, as a user runs it
  sandbox              the local sandbox in a fresh Python a submission (`grader grade` without the
                       command line's start), with the lanes a single grading gets (two as root)
  sandbox-one-lane     the same with one lane
  sandbox-unprotected  the same without namespaces (`--unsafe-local`, one lane)

Then, apart and in wall time, what a confinement's start costs: bubblewrap's namespaces against a
plain process, to a first worker that imported a submission.

    python -m benchmarks.bench_harness [--count 6] [--rounds 3] [--tier premium] [--class reference]
                                       [--cases floor,in-process,grade,sandbox,...]

Needs root (it makes cgroups and lends worker accounts).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_batch import arguments, compare
from grader.sandbox.local import worker_account

ROOT = Path(__file__).resolve().parent.parent

CASES = ("floor", "in-process", "grade", "sandbox", "sandbox-one-lane", "sandbox-unprotected")


def confinement_start(isolation: str, uid: int | None) -> float:
    """Seconds from nothing to a first worker that imported a submission, in a fresh confinement."""
    from grader.confined.limits import Limits
    from grader.harness.client import WorkerClient
    from grader.harness.confine import Confinement
    from grader.harness.contract import Job, worker_zip
    from grader.sandbox.layout import HARNESS_PACKAGE
    from grader.sandbox.local import bwrap_path, sandbox_python

    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        os.chmod(base, 0o711)
        (base / "pub").mkdir(mode=0o755)
        (base / "pub" / "worker.zip").write_bytes(worker_zip(HARNESS_PACKAGE))
        for path in (base / "pub").iterdir():
            path.chmod(0o644)
        (base / "private").mkdir(mode=0o700)
        job = Job(submission="student.py", module="student", names=[], suites=[], worker_code="pub/worker.zip",
                  worker_python=sandbox_python() or "/usr/bin/python3", isolation=isolation, private="private",
                  worker_user=uid, worker_group=uid, bwrap=bwrap_path(), limits=Limits())
        started = time.perf_counter()
        confinement = Confinement(job, str(base), 1)
        confinement.load(job.submission, b"x = 1\n")
        client = WorkerClient(confinement=confinement, module="student", limits=job.limits,
                              output_path=str(base / "private" / "out"))
        client.wait_ready()
        elapsed = time.perf_counter() - started
        client.close()
        confinement.close()
    return elapsed


def main() -> None:
    args = arguments(__doc__.split("\n\n")[0], CASES, 6, "reference")
    compare(args)
    with worker_account() as (uid, _):
        starts: dict[str, list[float]] = {"namespaces": [], "none": []}
        for _ in range(max(3, args.rounds * 3)):
            for isolation in starts:
                starts[isolation].append(confinement_start(isolation, uid))
    n, plain = statistics.median(starts["namespaces"]), statistics.median(starts["none"])
    print(f"  a confinement's start to a first ready worker (wall): bubblewrap namespaces {n * 1000:.1f} ms, "
          f"a plain process {plain * 1000:.1f} ms: namespaces add {(n - plain) * 1000:+.1f} ms a grading")


if __name__ == "__main__":
    main()
