"""The local backend: the harness as a child process on this machine, in a private job folder.

Isolation here comes from the worker: a separate process, as the unprivileged user `nobody` when the
grader runs as root, under rlimits, with a scrubbed environment, in a job folder it can read only
the public part of. It is the default where no Docker engine runs; Docker adds a container (no
network, read-only root, cgroup limits) around the same harness.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader.errors import GradingError
from grader.exercise import Exercise
from grader.harness.__main__ import BOOTSTRAP
from grader.sandbox.layout import HARNESS_PACKAGE, build_layout, harness_input, results_from_output

HARNESS_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    # No plugin the machine happens to have installed may join the grading run.
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


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


def worker_identity() -> tuple[int | None, int | None]:
    """Run workers as `nobody` when we can switch users (we are root); else as ourselves."""
    if os.geteuid() != 0:
        return None, None
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


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
    raise GradingError(f"no Python interpreter that the user 'nobody' may run: {sys.executable} sits in a "
                       "private folder and /usr/bin/python3 is missing")


def protect_secrets(exercise: Exercise) -> None:
    """Make the hidden suite and the solutions unreadable to other users before a worker runs.

    The job gets private copies anyway, but a worker running as `nobody` could otherwise read the
    originals straight from the project folder. Git keeps no folder modes, so this changes no file.
    """
    for folder in (exercise.root / "hidden_tests", exercise.root / "solutions"):
        if folder.is_dir() and folder.stat().st_mode & 0o077:
            folder.chmod(0o700)


def tail(data: bytes, limit: int = 4000) -> str:
    return data[-limit:].decode("utf-8", errors="replace")


def run_local(exercise: Exercise, source: bytes, tier: str) -> RawRun:
    worker = worker_identity()
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
