"""The files of one grading job, with their modes, for any backend; and what carries them.

Inside the sandbox, under the job's base folder:
    secret/       0700   job.json, the suites, the reference, private/ (the harness's own files)
    pub/          0755   the worker's code (worker.zip, 0644)
Every entry belongs to the harness. Under the namespaces isolation the base folder is 0700 and a
worker gets its code only through a descriptor the harness hands it; in a container (or with no
isolation) the base is 0711 so that the worker's account may pass through to `pub/`. Nothing in the
job is writable by a worker, and the submission is not in it: it comes with the run (`run_input`),
which may follow the job much later (a warm sandbox).

The suites and the reference of an exercise and tier are read once and reused by every grading of a
process (a batch, a service) until their files change.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import posixpath
import secrets
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

from grader.core.exercise import Exercise
from grader.core.fingerprint import files_fingerprint
from grader.core.seeding import KEY_FILE
from grader.disk_cache import keep, read_cached
from grader.harness.contract import (
    BYTECODE_FILE,
    JOB_FILE,
    Job,
    Run,
    Suite,
    input_frame,
    worker_files,
    worker_zip,
    zip_holds,
)
from grader.sandbox.bytecode import suites_bytecode
from grader.sandbox.interpreter import HARNESS_PACKAGE as HARNESS_PACKAGE

WORKER_ZIP = "pub/worker.zip"


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the job's base folder, POSIX separators
    data: bytes | None  # None for a folder
    mode: int


@dataclass(frozen=True)
class WorkerSettings:
    """How a backend runs workers: the contract's isolation, interpreter and account."""

    isolation: str
    python: str
    user: int | None = None
    group: int | None = None
    bwrap: str | None = None
    lane_accounts: tuple[tuple[int, int], ...] = ()  # the accounts of extra lanes (see `harness.lanes`)


@dataclass(frozen=True)
class PreparedSuites:
    """What every grading of one exercise and tier ships: the suites and, where used, the reference."""

    entries: tuple[Entry, ...]
    suites: tuple[Suite, ...]
    reference: str | None


@dataclass(frozen=True)
class JobLayout:
    entries: list[Entry]
    job: Job
    name: str  # names the job's processes and containers, for whoever cleans up or looks


def harness_files(package_dir: Path | str | None = None) -> list[tuple[str, bytes]]:
    """The code that runs inside the sandbox, as (path relative to the package's parent, bytes), sorted:
    `grader/__init__.py` and every `grader/harness/**/*.py` and `grader/confined/**/*.py`. `package_dir`
    defaults to this package."""
    package = Path(package_dir) if package_dir is not None else HARNESS_PACKAGE
    files = {f"{package.name}/__init__.py": (package / "__init__.py").read_bytes()}
    for path in [*(package / "harness").rglob("*.py"), *(package / "confined").rglob("*.py")]:
        if "__pycache__" not in path.parts:
            files[f"{package.name}/{path.relative_to(package).as_posix()}"] = path.read_bytes()
    return sorted(files.items())


def _tree(source: Path, target: str) -> list[Entry]:
    entries = [Entry(target, None, 0o700)]
    for path in sorted(source.rglob("*")):
        if "__pycache__" in path.parts or path.suffix == ".pyc" or path.name == KEY_FILE:
            continue  # the seed's key stays on the host: the seed itself travels in the job
        relative = f"{target}/{path.relative_to(source).as_posix()}"
        entries.append(Entry(relative, None, 0o700) if path.is_dir() else Entry(relative, path.read_bytes(), 0o600))
    return entries


_prepared: dict[tuple[str, str, str], tuple[tuple[tuple[str, int, int], ...], PreparedSuites]] = {}
_prepared_lock = threading.Lock()


def prepare_suites(exercise: Exercise, tier: str) -> PreparedSuites:
    """The suites and the reference of a tier, read once per process while their files are unchanged."""
    specs = exercise.suites_for(tier)
    uses_reference = exercise.reference.is_file() and exercise.needs_reference(tier)
    # exercise.toml too: its limits and names are in every job, so a sandbox made before it changed is stale.
    fingerprint = files_fingerprint([exercise.folder / "exercise.toml", *(s.path for s in specs)]
                                    + ([exercise.reference] if uses_reference else []))
    key = (str(exercise.root), exercise.slug, tier)
    with _prepared_lock:
        cached = _prepared.get(key)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
    entries = [Entry("secret/suites", None, 0o700)]
    suites = []
    for spec in specs:
        entries += _tree(spec.path, f"secret/suites/{spec.name}")
        suites.append(Suite(spec.name, f"secret/suites/{spec.name}", spec.reference, spec.details))
    reference = None
    if uses_reference:
        reference = f"secret/reference/{exercise.submission_file}"
        entries += [Entry("secret/reference", None, 0o700), Entry(reference, exercise.reference.read_bytes(), 0o600)]
    prepared = PreparedSuites(tuple(entries), tuple(suites), reference)
    with _prepared_lock:
        _prepared[key] = (fingerprint, prepared)
    return prepared


@functools.lru_cache(maxsize=1)
def _worker_zip() -> bytes:
    """The worker's zip, kept on disk by a digest of its sources and of the bytecode's version: a
    one-shot `grader grade` would otherwise compile the worker's modules on every run. A kept zip is
    used only when it holds exactly these sources, each with bytecode whose header names its source (the
    cache folder is trusted as the installation is: docs/security.md)."""
    files = worker_files(HARNESS_PACKAGE)
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    for name, data in files:
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    kept_as = f"worker-{digest.hexdigest()[:32]}.zip"
    kept = read_cached(kept_as)
    if kept is not None and zip_holds(kept, files):
        return kept
    made = worker_zip(HARNESS_PACKAGE)
    keep(kept_as, made)
    return made


def build_layout(exercise: Exercise, tier: str, settings: WorkerSettings, bytecode: bool = False) -> JobLayout:
    """Everything a backend places in the sandbox for one grading of a tier, before the submission; with
    `bytecode`, for a harness that runs this very Python, its suites' modules compiled (`bytecode`)."""
    prepared = prepare_suites(exercise, tier)
    entries = [
        Entry(".", None, 0o700 if settings.isolation == "namespaces" else 0o711),
        Entry("secret", None, 0o700), Entry("secret/private", None, 0o700),
        Entry("pub", None, 0o755), Entry(WORKER_ZIP, _worker_zip(), 0o644),
        *prepared.entries,
    ]
    compiled = suites_bytecode((entry.path, entry.data) for entry in prepared.entries
                               if entry.data is not None and entry.path.endswith(".py")) if bytecode else None
    if compiled is not None:
        folders = dict.fromkeys(posixpath.dirname(path) for path, _ in compiled.files)
        entries += [Entry(folder, None, 0o700) for folder in folders]
        entries += [Entry(path, data, 0o600) for path, data in compiled.files]
        entries.append(Entry(BYTECODE_FILE, compiled.rewritten, 0o600))
    job = Job(
        submission=exercise.submission_file, module=exercise.module, names=list(exercise.names),
        suites=list(prepared.suites), worker_code=WORKER_ZIP, worker_python=settings.python,
        isolation=settings.isolation, reference=prepared.reference, worker_user=settings.user,
        worker_group=settings.group, bwrap=settings.bwrap, limits=exercise.limits,
        lane_accounts=[list(account) for account in settings.lane_accounts],
    )
    entries.append(Entry(JOB_FILE, job.to_json().encode(), 0o600))
    return JobLayout(entries, job, f"job-{secrets.token_hex(8)}")


def harness_input(layout: JobLayout) -> bytes:
    """The first part of the harness's standard input: the job, as a tar in a frame."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for entry in layout.entries:
            info = tarfile.TarInfo(entry.path)
            info.mode = entry.mode
            if entry.data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(entry.data)
                archive.addfile(info, io.BytesIO(entry.data))
    return input_frame(buffer.getvalue())


def run_input(run: Run, source: bytes) -> bytes:
    """The second part: the run (nonce, seed), then the submission, each in a frame."""
    return input_frame(run.to_json().encode()) + input_frame(source)

