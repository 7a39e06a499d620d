"""The local backend: the harness as a child process on this machine, in a private job folder.

Isolation here comes from the worker: a separate process, as an unprivileged account of its own when
the grader runs as root, under rlimits, with a scrubbed environment, in a job folder it can read only
the public part of. It is the default where no Docker engine runs; Docker adds a container (no
network, read-only root, cgroup limits) around the same harness.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from grader.errors import GradingError
from grader.exercise import Exercise
from grader.harness.__main__ import BOOTSTRAP
from grader.sandbox.layout import HARNESS_PACKAGE, RawRun, build_layout, harness_input, results_from_output

HARNESS_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    # No plugin the machine happens to have installed may join the grading run.
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


WORKER_UIDS = range(61000, 61064)  # one account per concurrent local grading; no real user has these
LOCK_FOLDER = Path(tempfile.gettempdir()) / "grader-worker-accounts"


@contextlib.contextmanager
def worker_account() -> Iterator[tuple[int | None, int | None]]:
    """The uid/gid this grading's workers run as, held for the grading's whole duration.

    As root, every concurrent grading gets an account of its own from WORKER_UIDS (free in
    /etc/passwd, claimed with a lock file), so that a submission that signals or starves "its own"
    user's processes (`kill(-1, SIGKILL)`, a fork bomb against RLIMIT_NPROC) can only reach itself,
    never another student's grading running beside it. Not as root: the current user.
    """
    if os.geteuid() != 0:
        yield None, None
        return
    LOCK_FOLDER.mkdir(mode=0o700, exist_ok=True)
    for uid in WORKER_UIDS:
        try:
            pwd.getpwuid(uid)
            continue  # a real account: never borrow it
        except KeyError:
            pass
        with open(LOCK_FOLDER / str(uid), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            yield uid, uid
            return
    raise GradingError(f"all {len(WORKER_UIDS)} worker accounts are in use: too many gradings at once")


def usable_by_others(path: Path) -> bool:
    """Whether a user other than the owner can reach and execute `path` (every folder on the way o+x)."""
    resolved = path.resolve()
    return all(p.stat().st_mode & 0o001 for p in [resolved, *resolved.parents])


def worker_python(worker_uid: int | None) -> str:
    """An interpreter the worker's user may run. The worker needs only the standard library."""
    if worker_uid is None or usable_by_others(Path(sys.executable)):
        return sys.executable
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if Path(candidate).exists() and usable_by_others(Path(candidate)):
            return candidate
    raise GradingError(f"no Python interpreter that the worker's user may run: {sys.executable} sits in a "
                       "private folder and /usr/bin/python3 is missing")


def protect_secrets(exercise: Exercise) -> None:
    """Make the hidden suite and the solutions unreadable to other users before a worker runs.

    The job gets private copies anyway, but a worker running as another user could otherwise read the
    originals straight from the project folder. Git keeps no folder modes, so this changes no file.
    """
    for folder in (exercise.root / "hidden_tests", exercise.root / "solutions"):
        if folder.is_dir() and folder.stat().st_mode & 0o077:
            folder.chmod(0o700)


def tail(data: bytes, limit: int = 4000) -> str:
    return data[-limit:].decode("utf-8", errors="replace")


def run_local(exercise: Exercise, source: bytes, tier: str) -> RawRun:
    with worker_account() as worker:
        try:
            return _run_local(exercise, source, tier, worker)
        finally:
            if worker[0] is not None:
                sweep_account(worker[0])


def sweep_account(uid: int) -> None:
    """Kill every process left running as this grading's own worker account.

    The harness already kills each worker's group and, as a subreaper, whatever escaped it; this is
    the last sweep, for anything that outlived the harness itself. It is safe only because the account
    belongs to this grading alone (see `worker_account`): `kill(-1)` reaches that user's processes.
    """
    subprocess.run([worker_python(uid), "-I", "-S", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)"],
                   user=uid, group=uid, extra_groups=[], env={}, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)


def _run_local(exercise: Exercise, source: bytes, tier: str, worker: tuple[int | None, int | None]) -> RawRun:
    if worker[0] is not None:
        protect_secrets(exercise)
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="grader-job-"))
    os.chmod(base, 0o711)  # others may pass through to pub/ and scratch/, never list or read the rest
    try:
        layout = build_layout(exercise, source, tier, base=str(base), python=worker_python(worker[0]), harness_root=None,
                              worker_user=worker[0], worker_group=worker[1])
        # The harness runs from this installation; the worker, which may not be able to read it (it can
        # sit in root's home), gets the copy of the harness code that the job ships in pub/code.
        command = [sys.executable, "-I", "-c", BOOTSTRAP.format(root=str(HARNESS_PACKAGE.parent)), str(base)]
        timed_out = False
        with tempfile.TemporaryFile() as output:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT,
                                       cwd=base, env=HARNESS_ENV, start_new_session=True)
            try:
                assert process.stdin is not None
                process.stdin.write(harness_input(layout))
                process.stdin.close()
                process.wait(timeout=exercise.limits.total_timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            except BrokenPipeError:
                pass
            finally:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
            output.seek(0)
            printed = output.read()
        return RawRun(results=results_from_output(printed), nonce=layout.nonce, exit_status=process.returncode,
                      log_tail=tail(printed), timed_out=timed_out, duration_s=time.monotonic() - started)
    finally:
        shutil.rmtree(base, ignore_errors=True)
