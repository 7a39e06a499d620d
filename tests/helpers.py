"""Shared helpers for the project's tests: run a snippet of 'student' code in a real worker."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from grader.confined.clock import GroupCPU
from grader.confined.limits import Limits
from grader.harness.client import WorkerClient
from grader.harness.confine import Confinement
from grader.harness.contract import Job, worker_zip
from grader.sandbox.isolation import bwrap_path, isolation_problem, sandbox_python, worker_python
from grader.sandbox.layout import HARNESS_PACKAGE
from grader.sandbox.worker_accounts import worker_account

PROJECT = Path(__file__).resolve().parent.parent
EXERCISE = "continuous_batching"
REFERENCE = PROJECT / "solutions" / EXERCISE / "scheduler.py"
STUB = PROJECT / "exercises" / EXERCISE / "scheduler.py"
ATTACKS = PROJECT / "tests" / "attacks"


def mutant_file(name: str, slug: str = EXERCISE) -> Path:
    """An author's mutant of an exercise as a file: solutions/<slug>/mutants/ keeps each as the change it
    makes (grader/core/mutant_files.py), made into the file it gives of the reference."""
    from grader.core.exercise import load_exercise

    found = [path for path in load_exercise(slug, PROJECT).mutants if path.stem == name]
    assert found, f"no mutant {name} of {slug}"
    return found[0]


@contextlib.contextmanager
def confinement_for(source: str, limits: Limits | None = None) -> Iterator[tuple[Confinement, Callable[..., WorkerClient]]]:
    """A worker's confinement with `source` loaded as module `student`, confined as the grader would
    confine it (namespaces where this machine has them, else a plain process as the worker account),
    and a function that forks a worker in it, ready to be called, as the harness does for each test."""
    with worker_account() as (uid, gid), tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        os.chmod(base, 0o711)
        for relative, data, mode in (("pub/worker.zip", worker_zip(HARNESS_PACKAGE), 0o644),):
            (base / relative).parent.mkdir(mode=0o755, exist_ok=True)
            (base / relative).write_bytes(data)
            (base / relative).chmod(mode)
        (base / "private").mkdir(mode=0o700)
        isolated = isolation_problem() is None
        job = Job(submission="student.py", module="student", names=[], suites=[], worker_code="pub/worker.zip",
                  worker_python=(sandbox_python() if isolated else worker_python(uid)) or "/usr/bin/python3",
                  isolation="namespaces" if isolated else "none", private="private", worker_user=uid,
                  worker_group=gid, bwrap=bwrap_path(), limits=limits or Limits(call_timeout_s=2, import_timeout_s=3))
        confinement = Confinement(job, str(base), 1)
        confinement.load(job.submission, source.encode())
        started: list[WorkerClient] = []

        # What the confinement's processes use counts as the submission's, from its control group, as
        # the harness's pool does (`WorkerPool.cpu_count`); without one, the limits' bound holds.
        cpu = (lambda: GroupCPU(confinement.cpu_seconds)) if confinement.group is not None else None

        def spawn(wait: bool = True) -> WorkerClient:
            """A worker, ready; without `wait`, one whose fork's answer is not read yet (a spare)."""
            client = WorkerClient(confinement=confinement, module="student", limits=job.limits,
                                  output_path=str(base / "private" / f"output-{len(started)}.txt"), cpu=cpu,
                                  wait=wait)
            started.append(client)
            if wait:
                client.wait_ready()
            return client

        try:
            yield confinement, spawn
        finally:
            for client in started:
                client.close()
            confinement.close()


@contextlib.contextmanager
def worker_for(source: str, limits: Limits | None = None) -> Iterator[WorkerClient]:
    """A worker that imported `source` as module `student` (see `confinement_for`)."""
    with confinement_for(source, limits) as (_, spawn):
        yield spawn()


def load_module(path: Path, name: str) -> Any:
    """Import a file that is not on the path (a suite's helper module) under `name`."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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


# A submission whose every test fails with the account its worker runs as: "worker uid N".
WHO_AM_I = b'''import os


class Req:
    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"worker uid {os.getuid()}")


class Scheduler(Req):
    pass
'''


def wait_until(condition: Callable[[], Any], wait_s: float, what: str, every_s: float = 0.2) -> Any:
    """`condition()`'s first true value, tried every `every_s` seconds; fails after `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"{what}: not within {wait_s} s")
