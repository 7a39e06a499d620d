"""The graders without isolation the benchmarks compare against: the suites in a fresh in-process
pytest (the submission imported into pytest itself), and the same in one throwaway `docker run` each,
as a Gradescope-style autograder runs them.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from grader.core.seeding import seed_for_source
from grader.sandbox.interpreter import HARNESS_ENV

ROOT = Path(__file__).resolve().parent.parent


def finished(status: int, failures_allowed: bool) -> bool:
    """Whether a pytest run ended as it should: all passed (0), or with failed tests (1) when allowed."""
    return status == 0 or (failures_allowed and status == 1)


def seed_of(exercise, submission: Path) -> int:
    """The seed the grader gives this submission: every case of a benchmark does the same work with it."""
    return seed_for_source(submission.read_bytes(), exercise)


def in_process(exercise, tier: str, submission: Path | None = None, failures_allowed: bool = False) -> float:
    """Seconds of one fresh `pytest -p grader.harness.inprocess` run of the tier's suites against the
    submission (the reference by default) imported into pytest itself, with the submission's seed: no
    isolation at all."""
    reference = str(exercise.reference)
    seed = seed_of(exercise, submission or exercise.reference)
    env = {**HARNESS_ENV, "GRADER_SUBMISSION": str(submission or reference), "GRADER_REFERENCE": reference,
           "PYTHONPATH": str(ROOT)}
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


def gradescope_style(client, image: str, exercise, tier: str, submission: Path | None = None,
                     failures_allowed: bool = False, cgroup_parent: str | None = None) -> float:
    """One throwaway container that runs the suites in-process against the submission (the reference by
    default), no isolation inside: create, copy the files in, start, wait, remove."""
    suites = [spec for spec in exercise.suites_for(tier)]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for spec in suites:
            archive.add(str(spec.path), arcname=f"work/{spec.name}",
                        filter=lambda info: None if "__pycache__" in info.name else info)
        archive.add(str(submission or exercise.reference), arcname=f"work/{exercise.submission_file}")
        archive.add(str(exercise.reference), arcname=f"work/reference/{exercise.submission_file}")
    environment = {"GRADER_SUBMISSION": f"/work/{exercise.submission_file}",
                   "GRADER_REFERENCE": f"/work/reference/{exercise.submission_file}",
                   "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                   "GRADER_SEED": str(seed_of(exercise, submission or exercise.reference))}
    started = time.perf_counter()
    container = client.containers.create(
        image, ["python3", "-m", "pytest", "-q", "-p", "grader.harness.inprocess", "-p", "no:cacheprovider",
                "-c", "/dev/null", "--rootdir", "/work", *[f"/work/{spec.name}" for spec in suites]],
        network_mode="none", working_dir="/work", environment=environment,
        **({"cgroup_parent": cgroup_parent} if cgroup_parent else {}))
    try:
        container.put_archive("/", buffer.getvalue())
        container.start()
        status = container.wait(timeout=300)["StatusCode"]
    finally:
        container.remove(force=True)
    elapsed = time.perf_counter() - started
    if not finished(status, failures_allowed):
        raise SystemExit(f"the Gradescope-style run failed with status {status}")
    return elapsed
