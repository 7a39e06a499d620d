"""The worker accounts: the uids a grading's workers run as when the grader is root, one per concurrent
grading, lent under a lock file that every grader of the machine sees.

The local backend, the Docker backend (its containers share the host's user ids) and the grading
image (which names the accounts) all use these; nothing here knows how a grading runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import secrets
from collections.abc import Iterator
from pathlib import Path

from grader.errors import GradingError
from grader.sandbox.folders import private_folder


def _worker_uids() -> range:
    """The uids lent to gradings (GRADER_WORKER_UIDS="FIRST-LAST" moves them where they collide)."""
    first, _, last = os.environ.get("GRADER_WORKER_UIDS", "61000-61063").partition("-")
    return range(int(first), int(last) + 1)


WORKER_UIDS = _worker_uids()  # one account per concurrent grading; no real user has these
# The `account` isolation runs inside a container someone else started (a course platform's), which
# cannot see the host's locks: a grading on the host, or in another container, may hold any uid of
# WORKER_UIDS at the same time. There each grading draws its uid at random from this range instead,
# which nothing else here uses (two concurrent gradings in different containers share one with a
# chance of about one in a billion); the container's own locks still keep its gradings apart.
APART_UIDS = range(1 << 30, (1 << 31) - (1 << 16))
# Where root's graders lock the worker uids they lend: one place per host, whatever each grader's
# $TMPDIR, so that two graders (two `grader worker`s, a `batch` beside `serve`) never lend one uid at once.
HOST_LOCKS = Path("/run/grader")


def account_locks() -> Path:
    """The folder of the worker uid locks (as root: the host's own, under /run, made 0700 root and
    refused when it is anything else)."""
    try:
        return private_folder(private_folder(HOST_LOCKS) / "worker-uids")
    except FileNotFoundError:
        raise GradingError(f"{HOST_LOCKS.parent} is missing: the worker accounts' locks live there") from None


@contextlib.contextmanager
def worker_account(apart: bool = False) -> Iterator[tuple[int | None, int | None]]:
    """The uid/gid this grading's workers run as, held for the grading's whole duration.

    As root, every concurrent grading gets an account of its own from WORKER_UIDS (free in
    /etc/passwd, claimed with a lock file), so that a submission that starves "its own" user's
    processes (a fork bomb against RLIMIT_NPROC, which counts per user across the machine) can only
    reach itself, never another student's grading running beside it. The locks are the host's
    (`account_locks`): every grader of the machine sees every other's. `apart`: a uid drawn from
    APART_UIDS, for a grading in a container that cannot see the host's locks. Not as root: the current
    user.
    """
    if os.geteuid() != 0:
        yield None, None
        return
    locks = account_locks()
    candidates = [APART_UIDS[secrets.randbelow(len(APART_UIDS))] for _ in range(64)] if apart else WORKER_UIDS
    for uid in candidates:
        try:
            pwd.getpwuid(uid)
            continue  # a real account: never borrow it
        except KeyError:
            pass
        fd = os.open(locks / str(uid), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            yield uid, uid
            return
    raise GradingError(f"all {len(candidates)} worker accounts are in use: too many gradings at once")
