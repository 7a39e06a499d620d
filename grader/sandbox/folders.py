"""Folders the grader makes for a while: made with an owner lock, removed by their owner, and swept
when their owner died.

A job folder holds a grading's secret suites, reference and run, the image build's folder a rootfs of
a hundred megabytes; the process that made one removes it when it is done. A process killed outright
(SIGKILL, out of memory, a crashed service worker) removes nothing, so each folder carries a lock file
its maker holds (`flock`) for as long as the folder lives: the kernel lets go of it the moment that
process dies, however it dies, and any grader of the same user that later makes a folder of the same
kind removes the folders of that kind nobody holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from grader.errors import GradingError
from grader.sandbox.owners import due

JOB_PREFIX = "grader-job-"
OWNER_FILE = ".owner"  # held (flock, exclusive) by the process that made the folder, while it lives
SWEEP_INTERVAL_S = 60.0  # how often one process looks for abandoned folders
# A folder without an owner file is being made this instant, or was made by a grader without owner
# files (then it may still be in use): removed only once it is this old.
UNOWNED_AGE_S = 24 * 3600.0

_held: dict[Path, int] = {}  # folder -> the descriptor holding its lock
_held_lock = threading.Lock()


def make_job_folder(parent: Path | None) -> Path:
    """A fresh job folder in `parent` (the temporary folder if None); see `make_owned_folder`."""
    return make_owned_folder(parent, JOB_PREFIX)


@contextlib.contextmanager
def owned_folder(parent: Path | None, prefix: str) -> Iterator[Path]:
    """`make_owned_folder` for the length of a `with` block."""
    base = make_owned_folder(parent, prefix)
    try:
        yield base
    finally:
        remove_owned_folder(base)


def make_owned_folder(parent: Path | None, prefix: str) -> Path:
    """A fresh folder named `prefix...` in `parent` (the temporary folder if None), owned by this
    process until `remove_owned_folder`. Folders of the kind whose owner died are swept first (at most
    once a minute)."""
    sweep_abandoned(parent, prefix)
    base = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        fd = os.open(base / OWNER_FILE, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    fcntl.flock(fd, fcntl.LOCK_EX)
    with _held_lock:
        _held[base] = fd
    return base


def remove_owned_folder(base: Path) -> None:
    """Remove a folder this process made, then let go of its lock."""
    shutil.rmtree(base, ignore_errors=True)
    with _held_lock:
        fd = _held.pop(base, None)
    if fd is not None:
        os.close(fd)


def sweep_abandoned(parent: Path | None, prefix: str = JOB_PREFIX, force: bool = False) -> list[Path]:
    """Remove this user's folders `prefix...` in `parent` whose owner is gone; the folders removed.
    Skipped when this process swept them less than a minute ago, unless `force`."""
    folder = parent if parent is not None else Path(tempfile.gettempdir())
    if not due(f"{prefix} folders in {folder}", SWEEP_INTERVAL_S) and not force:
        return []
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        if entry.name.startswith(prefix) and _abandoned(entry):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed


def _abandoned(entry: os.DirEntry[str]) -> bool:
    """Whether nobody holds this folder. Taking its lock proves its owner died; the lock is let go
    of again at once, and a folder is only ever removed, never reused."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    if not entry.is_dir(follow_symlinks=False) or info.st_uid != os.geteuid():
        return False
    with _held_lock:
        if Path(entry.path) in _held:
            return False
    try:
        fd = os.open(os.path.join(entry.path, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return time.time() - info.st_mtime > UNOWNED_AGE_S
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held: its owner is alive
    finally:
        os.close(fd)
    return True


def private_folder(path: Path) -> Path:
    """`path` as a folder only this user may enter, made if missing; anything else there is refused."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise GradingError(f"{path} should be a folder private to this user (mode 0700), and it is not: "
                           "remove it and grade again")
    return path
