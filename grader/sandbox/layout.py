"""The files of one grading job, with their owners and modes, for any backend.

Inside the sandbox, under a base folder:
    secret/       0700 harness   job.json, the suites, the reference, results/, private/
    pub/          0755 harness   the submission (0644) and, for the local backend, the harness code
    scratch/      0700 worker    the worker's working folder
The worker's user can read `pub/` and write `scratch/`, and nothing else of the job.
"""

from __future__ import annotations

import base64
import binascii
import io
import posixpath
import secrets
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import grader
from grader.exercise import Exercise
from grader.harness.__main__ import JOB_FILE, RESULTS_MARKER
from grader.harness.job import Job, Suite

HARNESS_PACKAGE = Path(grader.__file__).resolve().parent
Owner = Literal["harness", "worker"]


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the job's base folder, POSIX separators
    data: bytes | None  # None for a folder
    mode: int
    owner: Owner = "harness"


@dataclass(frozen=True)
class JobLayout:
    entries: list[Entry]
    job: Job
    nonce: str


def harness_files(package_dir: Path | str | None = None) -> list[tuple[str, bytes]]:
    """The code that runs inside the sandbox, as (path relative to the package's parent, bytes), sorted:
    `grader/__init__.py` and every `grader/harness/**/*.py`. `package_dir` defaults to this package."""
    package = Path(package_dir) if package_dir is not None else HARNESS_PACKAGE
    files = {f"{package.name}/__init__.py": (package / "__init__.py").read_bytes()}
    for path in (package / "harness").rglob("*.py"):
        if "__pycache__" not in path.parts:
            files[f"{package.name}/{path.relative_to(package).as_posix()}"] = path.read_bytes()
    return sorted(files.items())


def _ancestors(relative: str) -> list[str]:
    parts = relative.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _tree(source: Path, target: str) -> list[Entry]:
    entries = [Entry(target, None, 0o700)]
    for path in sorted(source.rglob("*")):
        if "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        relative = f"{target}/{path.relative_to(source).as_posix()}"
        entries.append(Entry(relative, None, 0o700) if path.is_dir() else Entry(relative, path.read_bytes(), 0o600))
    return entries


def build_layout(exercise: Exercise, source: bytes, tier: str, *, base: str, python: str,
                 harness_root: str | None, worker_user: int | None, worker_group: int | None) -> JobLayout:
    """Everything a backend places in the sandbox. `harness_root` None means: ship the harness code."""
    entries = [
        # The job folder itself: others may pass through to pub/ and scratch/, never list it.
        Entry(".", None, 0o711),
        Entry("secret", None, 0o700), Entry("secret/private", None, 0o700), Entry("secret/results", None, 0o700),
        Entry("pub", None, 0o755), Entry("pub/submission", None, 0o755),
        Entry(f"pub/submission/{exercise.submission_file}", source, 0o644),
        Entry("scratch", None, 0o700, owner="worker"),
    ]
    if harness_root is None:
        harness_root = posixpath.join(base, "pub/code")
        code = harness_files()
        folders = {parent for relative, _ in code for parent in _ancestors(relative)}
        entries += [Entry("pub/code", None, 0o755)] + [Entry(f"pub/code/{f}", None, 0o755) for f in sorted(folders)]
        entries += [Entry(f"pub/code/{relative}", data, 0o644) for relative, data in code]
    suites = []
    entries.append(Entry("secret/suites", None, 0o700))
    for suite in exercise.suites_for(tier):
        entries += _tree(suite.path, f"secret/suites/{suite.name}")
        suites.append(Suite(suite.name, posixpath.join(base, "secret/suites", suite.name), suite.reference,
                            suite.details))
    reference = None
    if exercise.reference.is_file() and exercise.needs_reference(tier):
        entries += [Entry("secret/reference", None, 0o700),
                    Entry(f"secret/reference/{exercise.submission_file}", exercise.reference.read_bytes(), 0o600)]
        reference = posixpath.join(base, "secret/reference", exercise.submission_file)
    job = Job(
        submission=posixpath.join(base, "pub/submission", exercise.submission_file), module=exercise.module,
        names=list(exercise.names), harness_root=harness_root, python=python, suites=suites,
        results=posixpath.join(base, "secret/results/results.json"), private=posixpath.join(base, "secret/private"),
        scratch=posixpath.join(base, "scratch"), reference=reference, worker_user=worker_user,
        worker_group=worker_group, limits=exercise.limits,
    )
    entries.append(Entry(JOB_FILE, job.to_json().encode(), 0o600))
    return JobLayout(entries, job, secrets.token_hex(16))


@dataclass
class RawRun:
    """What a backend hands back: the harness's results file (or None) and what explains its absence."""

    results: bytes | None
    nonce: str
    exit_status: int | None
    log_tail: str
    timed_out: bool
    duration_s: float
    detail: str = ""  # a backend's own explanation (out of memory, ...)


def harness_input(layout: JobLayout) -> bytes:
    """What the harness reads on standard input: the nonce line, then the job as a tar with owners."""
    worker_uid = layout.job.worker_user if layout.job.worker_user is not None else 0
    worker_gid = layout.job.worker_group if layout.job.worker_group is not None else worker_uid
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for entry in layout.entries:
            info = tarfile.TarInfo(entry.path)
            info.mode = entry.mode
            info.uid, info.gid = (worker_uid, worker_gid) if entry.owner == "worker" else (0, 0)
            if entry.data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(entry.data)
                archive.addfile(info, io.BytesIO(entry.data))
    return layout.nonce.encode() + b"\n" + buffer.getvalue()


def results_from_output(output: bytes) -> bytes | None:
    """The results document the harness printed last, or None when there is none."""
    marker = RESULTS_MARKER.encode() + b" "
    for line in reversed(output.splitlines()):
        if line.startswith(marker):
            try:
                return base64.b64decode(line[len(marker):], validate=True)
            except (binascii.Error, ValueError):
                return None
    return None
