"""Benchmark: the isolated harness against the same suites run in-process, side by side.

Grades the reference N times through the local sandbox as `grader grade` does (job folder, harness
process, workers in namespaces of their own, a fresh worker per test, every call over the pipe; two
lanes as root on two cores or more), N times with one lane, N times through the same sandbox without
namespaces (`--unsafe-local`, one lane: what the namespaces cost), and runs the same test
files N times in-process with the plain `grader.harness.inprocess` fixture (the submission imported
into pytest itself). Every side pays for one Python start-up and one pytest session per run, so the
ratios are what isolation costs. Runs alternate so that a busy machine slows all alike.

    python benchmarks/bench_harness.py [--runs 10] [--tier premium]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.exercise import load_exercise  # noqa: E402
from grader.grading import grade_bytes  # noqa: E402
from grader.sandbox.local import HARNESS_ENV, LocalBackend, worker_account  # noqa: E402


def finished(status: int, failures_allowed: bool) -> bool:
    """Whether a pytest run ended as it should: all passed (0), or with failed tests (1) when allowed."""
    return status == 0 or (failures_allowed and status == 1)


def in_process(exercise, tier: str, submission: Path | None = None, seed: int | None = None,
               failures_allowed: bool = False) -> float:
    """Seconds of one fresh `pytest -p grader.harness.inprocess` run of the tier's suites against the
    submission (the reference by default) imported into pytest itself: no isolation at all."""
    reference = str(exercise.reference)
    env = {**HARNESS_ENV, "GRADER_SUBMISSION": str(submission or reference), "GRADER_REFERENCE": reference,
           "PYTHONPATH": str(ROOT)}
    if seed is not None:
        env["GRADER_SEED"] = str(seed)
    suites = [str(s.path) for s in exercise.suites_for(tier)]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "grader.harness.inprocess", "-p",
                           "no:cacheprovider", "-c", os.devnull, "--rootdir", str(ROOT), *suites],
                          capture_output=True, text=True, cwd=ROOT, env=env)
    elapsed = time.perf_counter() - started
    if not finished(done.returncode, failures_allowed):
        raise SystemExit(f"the in-process run failed:\n{done.stdout[-2000:]}")
    return elapsed


def isolated(exercise, tier: str, backend: LocalBackend | None = None) -> tuple[float, int]:
    backend = backend or LocalBackend()
    data = exercise.reference.read_bytes()
    started = time.perf_counter()
    card = grade_bytes(data, exercise, tier, backend, "local")
    elapsed = time.perf_counter() - started
    if card.score != card.max_score:
        raise SystemExit(f"the reference did not get full marks through the harness: {card.reason}")
    return elapsed, len(card.tests)


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tier", default="premium")
    parser.add_argument("--exercise", default="continuous_batching")
    args = parser.parse_args()
    exercise = load_exercise(args.exercise, ROOT)
    isolated(exercise, args.tier), in_process(exercise, args.tier)  # warm the file cache
    default, one_lane, unprotected = LocalBackend(), LocalBackend(lanes=1), LocalBackend(unsafe=True)
    isolated(exercise, args.tier, one_lane), isolated(exercise, args.tier, unprotected)
    harness_times, lane_times, bare_times, plain_times, tests = [], [], [], [], 0
    for _ in range(args.runs):
        elapsed, tests = isolated(exercise, args.tier, default)
        harness_times.append(elapsed)
        lane_times.append(isolated(exercise, args.tier, one_lane)[0])
        bare_times.append(isolated(exercise, args.tier, unprotected)[0])
        plain_times.append(in_process(exercise, args.tier))
    h, o, b, p = (statistics.median(t) for t in (harness_times, lane_times, bare_times, plain_times))
    spread = lambda times: f"(min {min(times):.3f}, max {max(times):.3f})"  # noqa: E731
    print(f"exercise {exercise.slug}, tier {args.tier}, {tests} tests, {args.runs} runs each, alternating")
    print(f"  isolated harness, {default.lane_count()} lane(s) (grader grade): median {h:.3f} s  {spread(harness_times)}")
    print(f"  isolated harness, one lane:             median {o:.3f} s  {spread(lane_times)}")
    print(f"  one lane without namespaces:            median {b:.3f} s  {spread(bare_times)}")
    print(f"  in-process, plain fixture:              median {p:.3f} s  {spread(plain_times)}")
    print(f"  ratio isolated / in-process: {h / p:.2f}x (one lane: {o / p:.2f}x)")
    print(f"  isolation cost per test, one lane: {(o - p) / tests * 1000:.1f} ms")
    print(f"  namespaces cost per grading (one lane, isolated - without namespaces): {(o - b) * 1000:+.0f} ms")
    with worker_account() as (uid, _):
        starts: dict[str, list[float]] = {"namespaces": [], "none": []}
        for _ in range(args.runs * 3):
            for isolation in starts:
                starts[isolation].append(confinement_start(isolation, uid))
    n, plain = statistics.median(starts["namespaces"]), statistics.median(starts["none"])
    print(f"  a confinement's start to a first ready worker: bubblewrap namespaces {n * 1000:.1f} ms, "
          f"a plain process {plain * 1000:.1f} ms: namespaces add {(n - plain) * 1000:+.1f} ms per grading")


if __name__ == "__main__":
    main()
