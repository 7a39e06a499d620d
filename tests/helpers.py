"""Shared helpers for the project's tests: run a snippet of 'student' code in a real worker."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from grader.harness.client import WorkerClient
from grader.harness.limits import Limits
from grader.sandbox.layout import harness_files
from grader.sandbox.local import worker_account, worker_python

PROJECT = Path(__file__).resolve().parent.parent
EXERCISE = "continuous_batching"
REFERENCE = PROJECT / "solutions" / EXERCISE / "scheduler.py"
STUB = PROJECT / "exercises" / EXERCISE / "scheduler.py"
ATTACKS = PROJECT / "tests" / "attacks"


@contextlib.contextmanager
def worker_for(source: str, limits: Limits | None = None) -> Iterator[WorkerClient]:
    """A worker that imported `source` as module `student`, run as the grader would run it."""
    with worker_account() as (uid, gid), tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        os.chmod(base, 0o755)
        submission = base / "student.py"
        submission.write_text(source, encoding="utf-8")
        submission.chmod(0o644)
        scratch = base / "scratch"
        scratch.mkdir()
        if uid is not None:
            os.chown(scratch, uid, gid)
        # The worker's user may not read the project (a private checkout): ship the harness code, as grading does.
        code = base / "code"
        for relative, data in harness_files():
            (code / relative).parent.mkdir(parents=True, exist_ok=True)
            (code / relative).write_bytes(data)
        for path in [code, *code.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        client = WorkerClient(python=worker_python(uid), harness_root=str(code), submission=str(submission),
                              module="student", limits=limits or Limits(call_timeout_s=2, import_timeout_s=3),
                              cwd=str(scratch), output_path=str(base / "output.txt"), user=uid, group=gid)
        try:
            client.wait_ready()
            yield client
        finally:
            client.close()


def exercise_copy(folder: Path, **limits: float) -> Path:
    """A private copy of the exercise (statement, suites, reference) with some limits changed.

    Returns the copy's exercise folder, which `load_exercise` accepts as a path.
    """
    import shutil
    import tomllib

    for top in ("exercises", "hidden_tests", "solutions"):
        shutil.copytree(PROJECT / top / EXERCISE, folder / top / EXERCISE,
                        ignore=shutil.ignore_patterns("__pycache__"))
    toml = folder / "exercises" / EXERCISE / "exercise.toml"
    config = tomllib.loads(toml.read_text())
    config["limits"].update(limits)
    text = toml.read_text()
    start = text.index("[limits]")
    end = text.index("\n[", start + 1)
    table = "[limits]\n" + "".join(f"{k} = {v}\n" for k, v in config["limits"].items())
    toml.write_text(text[:start] + table + text[end:])
    return folder / "exercises" / EXERCISE
