"""Whether this machine can isolate untrusted code, and how: the local sandbox's checks.

Workers go in bubblewrap's namespaces where it can make them ("namespaces"); inside a container that
allows none, as root, each submission runs as an account of its own under `restrict`'s restrictions
("account"); elsewhere the local sandbox refuses untrusted code and says why. Each check is made by
doing it (starting the worker's Python in the very sandbox it would get), once per process.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from grader.core.exercise import Exercise
from grader.errors import GradingError, SandboxUnavailable
from grader.harness.contract import SANDBOX_ENV, bwrap_arguments, restrict, seccomp_program
from grader.sandbox.worker_accounts import worker_account


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


def sandbox_python() -> str | None:
    """An interpreter inside /usr, which is all of the system a namespaced worker sees."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        if candidate.startswith("/usr/") and os.access(candidate, os.X_OK) and usable_by_others(Path(candidate)):
            return candidate
    return None


def bwrap_path() -> str | None:
    """bubblewrap, or the stand-in GRADER_BWRAP names (tests use one that fails)."""
    return os.environ.get("GRADER_BWRAP") or shutil.which("bwrap")


@functools.lru_cache(maxsize=8)
def namespaces_problem(bwrap: str | None, python: str | None, uid: int | None) -> str | None:
    """Why workers cannot be put in namespaces here (None: they can). Checked once per process by
    starting the worker's Python in the very sandbox it would get."""
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)"
    if python is None:
        return "no Python under /usr for the worker (Debian: apt-get install python3)"
    read_code, write_code = os.pipe()
    os.close(write_code)
    refusals = seccomp_program()
    passed = [read_code]
    if refusals is not None:
        passed.append(os.memfd_create("seccomp", 0))
        os.write(passed[-1], refusals)
        os.lseek(passed[-1], 0, os.SEEK_SET)
    command = bwrap_arguments(bwrap, read_code, seccomp_fd=passed[1] if refusals is not None else None) + [
        python, "-I", "-S", "-c", "pass"]
    privileges: dict[str, Any] = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
    try:
        done: subprocess.CompletedProcess[bytes] = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, env=dict(SANDBOX_ENV),
            pass_fds=tuple(passed), timeout=20, check=False, **privileges)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not be started ({exc})"
    finally:
        for fd in passed:
            os.close(fd)
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bubblewrap could not make namespaces ({said[-1] if said else f'exit status {done.returncode}'})"
    return None


def isolation_problem() -> str | None:
    """Why the local sandbox cannot put workers in namespaces on this machine, or None."""
    with worker_account() as (uid, _):
        return namespaces_problem(bwrap_path(), sandbox_python(), uid)


CONTAINER_MARKS = ("/.dockerenv", "/run/.containerenv")  # Docker's and Podman's


def in_container() -> bool:
    """Whether this process runs in a container (the outer sandbox of the `account` isolation)."""
    return any(os.path.exists(mark) for mark in CONTAINER_MARKS)


# Run as a worker account: put `restrict`'s restrictions in place, as the zygote will, and say what held.
_ACCOUNT_PROBE = """{restrict}
import json
confined = confine_self(read=[], write=[])
print(json.dumps({{"landlock": confined.landlock_abi}}))
"""


# How often the account isolation's check is made before its failure is believed: a probe can be ended
# by what has nothing to do with the container (killed while the machine runs short of memory).
ACCOUNT_CHECK_TRIES = 3


@functools.lru_cache(maxsize=4)
def account_problem() -> str | None:
    """Why workers cannot run here as an account of their own under `restrict`'s restrictions (the
    `account` isolation), or None. Checked once per process by doing it; a probe ended by a signal or
    that did not finish is tried again before the isolation is refused."""
    problem = None
    for attempt in range(ACCOUNT_CHECK_TRIES):
        problem, certain = _account_check()
        if problem is None or certain:
            return problem
        time.sleep(0.5 * (attempt + 1))
    return problem


def _account_check() -> tuple[str | None, bool]:
    """(why the account isolation cannot be given, or None; whether that answer can be trusted at once)."""
    if os.geteuid() != 0:
        return (f"the grader runs as uid {os.geteuid()}, not as root: without namespaces it needs root to run "
                "each submission as an account of its own"), True
    with worker_account(apart=True) as (uid, gid):
        code = _ACCOUNT_PROBE.format(restrict=Path(restrict.__file__).read_text(encoding="utf-8"))
        try:
            done = subprocess.run([worker_python(uid), "-I", "-S", "-c", code], user=uid, group=gid, extra_groups=[],
                                  env=dict(SANDBOX_ENV), stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                                  check=False)
        except PermissionError as exc:
            return f"root may not run a process as another account here ({exc}): the container lacks CAP_SETUID", True
        except subprocess.TimeoutExpired as exc:
            return f"a process as the worker's account did not finish its check ({exc})", False
        except (OSError, subprocess.SubprocessError) as exc:
            return f"a process as the worker's account could not be started ({exc})", False
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return (f"the worker's restrictions cannot be put in place ({said[-1] if said else done.returncode})",
                done.returncode > 0)
    return None, True


def local_isolation() -> str:
    """The isolation the local sandbox gives untrusted code here: "namespaces" where bubblewrap can make
    them; else, inside a container, "account"; else SandboxUnavailable says why not."""
    problem = isolation_problem()
    if problem is None:
        return "namespaces"
    if not in_container():
        raise SandboxUnavailable(refusal(problem))
    why = account_problem()
    if why is not None:
        raise SandboxUnavailable(account_refusal(problem, why))
    return "account"


def account_refusal(namespaces: str, account: str) -> str:
    return (f"the local sandbox cannot isolate untrusted code in this container: {namespaces}, and {account}. "
            "Run the grader as root in the container (course platforms do), or give the container the privileges "
            "bubblewrap needs (docs/platforms.md); --unsafe-local grades your own trusted code "
            "without isolation")


def readable_secrets(exercise: Exercise, tier: str, uid: int, gid: int) -> list[str]:
    """The exercise's secret files (the suites a student cannot read, the reference, the seed key) that
    the worker's account could open itself: without namespaces only their modes keep them from it."""
    from grader.core.seeding import KEY_FILE

    public = {exercise.suites[name].path.resolve() for name in exercise.open_suites if name in exercise.suites}
    paths = [path for suite in exercise.suites.values() if suite.path.resolve() not in public
             for path in sorted(suite.path.rglob("*")) if path.is_file()]
    paths += [path for path in (exercise.reference, exercise.root / "hidden_tests" / exercise.slug / KEY_FILE)
              if path.is_file()]
    paths = list(dict.fromkeys(paths))
    code = "import os, sys; print('\\n'.join(p for p in sys.argv[1:] if os.access(p, os.R_OK)))"
    done = subprocess.run([worker_python(uid), "-I", "-S", "-c", code, *map(str, paths)], user=uid, group=gid,
                          extra_groups=[], env=dict(SANDBOX_ENV), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60, check=False)
    if done.returncode != 0:
        return [f"(the check could not run: {done.stderr.strip()[-300:]})"]
    return done.stdout.split()


def refusal(problem: str) -> str:
    return (f"the local sandbox cannot isolate untrusted code here: {problem}. Grade with --sandbox docker, "
            "enable unprivileged user namespaces (sysctl user.max_user_namespaces, "
            "kernel.unprivileged_userns_clone) or run as root where they are on, or pass --unsafe-local for "
            "your own trusted code only")

