"""The local backend: the harness as a child process on this machine, the worker in namespaces.

The harness (trusted) runs as the grading user in a private job folder. Its workers (untrusted) run
under bubblewrap in mount, PID, network, IPC and UTS namespaces of their own, as an account of their
own when the grader runs as root (see `harness.confine`). They see a read-only system, the submission
and a private tmpfs: nothing of the project, the store, the batch folder or other jobs.

Where bubblewrap cannot make namespaces (not installed, or user namespaces switched off), the local
sandbox refuses untrusted code: `LocalBackend(unsafe=True)` (`--unsafe-local`) runs the worker as a
plain process instead, and is meant only for one's own trusted code.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from grader.core.exercise import Exercise
from grader.errors import GradingError, SandboxUnavailable
from grader.harness.contract import (
    SANDBOX_ENV,
    Run,
    bootstrap,
    bwrap_arguments,
    process_ending,
    restrict,
    results_from_output,
    seccomp_program,
    wait_for_exit,
)
from grader.sandbox.folders import make_job_folder, private_folder, remove_owned_folder
from grader.sandbox.forkservers import FORK_SERVER_RUNS, ForkedHarness, ForkServerLost, HarnessForkServer
from grader.sandbox.layout import (
    HARNESS_PACKAGE,
    JobLayout,
    PreparedSuites,
    RawRun,
    WorkerSettings,
    build_layout,
    harness_input,
    prepare_suites,
    run_input,
)
from grader.sandbox.warm import WarmSlots
from grader.sandbox.worker_accounts import worker_account

HARNESS_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    # No plugin the machine happens to have installed may join the grading run.
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
UNSAFE_WARNING = ("--unsafe-local: the submission runs WITHOUT isolation, as a plain process that can read "
                  "whatever its account can read. Use it only for your own trusted code.")


def jobs_root() -> Path:
    """The private parent of every job folder of this user."""
    return private_folder(Path(tempfile.gettempdir()) / f"grader-{os.geteuid()}")


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


FORK_SERVERS_KEPT = 4  # harness fork servers a warm backend keeps (one per exercise and tier, the latest used)


@dataclass
class LocalBackend:
    """Grades on this machine. `unsafe`: no namespaces, for one's own trusted code only. `warm`: keep
    a sandbox started and ready (harness up, tests collected, workers' confinement waiting) for the
    next submission of the same exercise and tier; each still grades exactly one submission. A warm
    backend forks each harness from a fork server of the exercise's tier (see `harness.forkserver`), so
    that pytest's start and the collection happen once, not once per submission."""

    name = "local"

    unsafe: bool = False
    warm: bool = False
    # "namespaces" or "account" (`contract.ISOLATIONS`); None: chosen at the first grading by
    # `local_isolation` (namespaces where bubblewrap can make them, else inside a container an account).
    isolation: str | None = None
    lanes: int | None = None  # harness processes per grading; None: see `lane_count`
    _ready: WarmSlots[StartedHarness] = field(default_factory=WarmSlots, repr=False)
    _fork_servers: dict[tuple[str, str, str], HarnessForkServer] = field(default_factory=dict, repr=False)
    _retired: list[HarnessForkServer] = field(default_factory=list, repr=False)
    fork_servers_off: str = ""  # why this backend stopped using fork servers (one failed it): cold harnesses only

    _secrets_checked: set[tuple[str, str, str]] = field(default_factory=set, repr=False)

    def check(self) -> None:
        """Raise SandboxUnavailable when this machine cannot give workers the isolation promised."""
        if self.unsafe:
            return
        if self.isolation is None:
            self.isolation = local_isolation()
        elif self.isolation == "namespaces":
            problem = isolation_problem()
            if problem is not None:
                raise SandboxUnavailable(refusal(problem))
        elif self.isolation == "account":
            problem = account_problem()
            if problem is not None:
                raise SandboxUnavailable(f"the account isolation cannot be given here: {problem}")
        else:
            raise SandboxUnavailable(f"the local sandbox has no isolation {self.isolation!r}")

    def check_secrets(self, exercise: Exercise, tier: str, uid: int | None, gid: int | None) -> None:
        """Under the account isolation, refuse to grade where the worker's account could read the hidden
        suites, the reference or the seed key (once per exercise and tier of this backend)."""
        key = (str(exercise.root), exercise.slug, tier)
        if self.isolation != "account" or key in self._secrets_checked:
            return
        assert uid is not None and gid is not None  # account_problem() made sure the grader is root
        readable = readable_secrets(exercise, tier, uid, gid)
        if readable:
            shown = ", ".join(readable[:3]) + (f" and {len(readable) - 3} more" if len(readable) > 3 else "")
            raise SandboxUnavailable(
                f"without namespaces a submission runs on this container's files, and it could read {shown}: "
                f"make the exercise's hidden suites, reference and seed key readable by root only "
                f"(chmod -R go-rwx {exercise.root})")
        self._secrets_checked.add(key)

    def settings(self, uid: int | None, gid: int | None,
                 lane_accounts: tuple[tuple[int, int], ...] = ()) -> WorkerSettings:
        if self.unsafe:
            return WorkerSettings("none", worker_python(uid), uid, gid)
        if self.isolation == "account":
            return WorkerSettings("account", worker_python(uid), uid, gid)
        python = sandbox_python()
        assert python is not None  # check() made sure
        return WorkerSettings("namespaces", python, uid, gid, bwrap_path(), lane_accounts)

    def lane_count(self) -> int:
        """How many harness processes share one grading's tests (`harness.lanes`). By default two for a
        single grading (a warm backend grades many at once: its gradings are its parallelism) on a
        machine with two cores or more, as root, where each lane gets a worker account of its own
        (sharing one, a lane's threads would count against the other's process limit), and with
        namespaces (each lane's confinement is its own)."""
        if self.lanes is not None:
            return max(1, self.lanes)
        if self.warm or self.unsafe or self.isolation == "account" or os.geteuid() != 0:
            return 1
        return min(2, len(os.sched_getaffinity(0)))

    def start(self, exercise: Exercise, tier: str) -> StartedHarness:
        """A harness started for this exercise and tier, getting ready while it waits for a submission."""
        account = contextlib.ExitStack()
        uid, gid = account.enter_context(worker_account(apart=self.isolation == "account"))
        try:
            self.check_secrets(exercise, tier, uid, gid)
            if self.warm and not self.fork_servers_off:
                order = self.fork_server(exercise, tier, self.settings(uid, gid)).order(uid, gid)
                if order is not None:
                    fork_server = order.process.fork_server
                    return StartedHarness(order.process, order.folder, order.output, fork_server.layout,
                                          fork_server.prepared, order.settings, account)
            return start_harness(exercise, tier, self.settings(uid, gid, self.lane_accounts(account)), account)
        except BaseException:
            account.close()
            raise

    def lane_accounts(self, account: contextlib.ExitStack) -> tuple[tuple[int, int], ...]:
        """A worker account for each extra lane, held with the grading's own; as many as are free (a
        grading with fewer lanes is only slower)."""
        found: list[tuple[int, int]] = []
        if self.unsafe or self.isolation == "account" or os.geteuid() != 0:
            return ()
        for _ in range(self.lane_count() - 1):
            try:
                uid, gid = account.enter_context(worker_account())
            except GradingError:
                break
            assert uid is not None and gid is not None
            found.append((uid, gid))
        return tuple(found)

    def fork_server(self, exercise: Exercise, tier: str, settings: WorkerSettings) -> HarnessForkServer:
        """The fork server of this exercise and tier, started if missing, dead or made from older suites.
        A replaced fork server is retired, not ended: a grading forked from it may still be running."""
        key = WarmSlots.key(exercise, tier)
        fork_server = self._fork_servers.pop(key, None)
        if fork_server is not None and not fork_server.fresh_for(exercise, tier):
            self._retired.append(fork_server)
            fork_server = None
        if fork_server is None:
            fork_server = start_fork_server(exercise, tier, settings)
        self._fork_servers[key] = fork_server  # the latest used last
        while len(self._fork_servers) > FORK_SERVERS_KEPT:
            self._retired.append(self._fork_servers.pop(next(iter(self._fork_servers))))
        return fork_server

    def end_retired(self) -> None:
        while self._retired:
            self._retired.pop().close()

    def __call__(self, exercise: Exercise, source: bytes, tier: str, run: Run) -> RawRun:
        self.check()
        self.end_retired()  # the grading before this one is over: nothing runs from them any more
        start = lambda: self.start(exercise, tier)  # noqa: E731
        started = self._ready.take(exercise, tier, start)
        # A warm backend gets the next submission's sandbox ready while this one grades.
        then = self._ready.refill(exercise, tier, start) if self.warm else None
        try:
            raw = finish_harness(started, exercise, source, run, then)
        except ForkServerLost as lost:
            # The submission was not sent: grade it in a harness of its own, and use no fork server again.
            self.fork_servers_off = str(lost)
            return finish_harness(start(), exercise, source, run, then)
        if isinstance(started.process, ForkedHarness) and not raw.timed_out \
                and results_from_output(raw.output) is None and _ended(started.process.fork_server.process):
            # Its fork server died (nothing a submission can reach) and took it along, as a harness ends with
            # its fork server: the submission is graded again, in a sandbox of a new fork server.
            return finish_harness(start(), exercise, source, run)
        return raw

    def close(self) -> None:
        """End the sandboxes waiting for a submission, and the fork servers."""
        self._ready.close()
        self._retired.extend(self._fork_servers.values())
        self._fork_servers.clear()
        self.end_retired()


run_local = LocalBackend()


# Run as a worker account once none of its processes is left: remove what it owns at the top of the
# machine's temporary folders (the zygote's copy of the submission, the loader's folder, whatever the
# submission wrote there). As that account it can remove nothing else.
_REMOVE_OWN_TEMPORARY_FILES = """
import os, shutil
for root in ("/tmp", "/var/tmp", "/dev/shm"):
    try:
        entries = list(os.scandir(root))
    except OSError:
        continue
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass
"""


def sweep_account(uid: int) -> None:
    """End what this grading's own worker account left (no namespaces only, where its workers share the
    machine): every process still running as it in this PID namespace (a worker that escaped its process
    group, which nothing else ends once the harness is gone), then its files in the temporary folders,
    which the next grading under this account could otherwise read. Never a process of a container below
    (a `kill(-1)` as the account would reach one that happens to run as the same uid)."""
    end_processes_of(uid)
    subprocess.run([worker_python(uid), "-I", "-S", "-c", _REMOVE_OWN_TEMPORARY_FILES],
                   user=uid, group=uid, extra_groups=[], env={}, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)


def end_processes_of(uid: int, rounds: int = 200) -> None:
    """SIGKILL every process of `uid` in this process's own PID namespace, until none is left (one that
    forks meanwhile is caught at the next pass). Each is signalled through a pidfd opened and checked
    first, so a pid reused meanwhile by another process is never signalled."""
    try:
        own = os.readlink("/proc/self/ns/pid")
    except OSError:
        return
    for _ in range(rounds):
        found = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid or os.readlink(f"/proc/{entry.name}/ns/pid") != own:
                    continue
                pidfd = os.pidfd_open(int(entry.name))
            except OSError:
                continue
            try:
                if os.stat(f"/proc/{entry.name}").st_uid == uid:  # still it: the pidfd holds this very process
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    found += 1
            except OSError:
                pass
            finally:
                os.close(pidfd)
        if not found:
            return
        time.sleep(0.01)


@dataclass
class StartedHarness:
    """A harness process that has its job and waits for the run: the submission, its nonce and seed.
    `base` is its own folder, removed at its end (a forked harness's is inside its fork server's)."""

    process: subprocess.Popen[bytes] | ForkedHarness
    base: Path
    output: IO[bytes]
    layout: JobLayout
    prepared: PreparedSuites
    settings: WorkerSettings
    account: contextlib.ExitStack

    def fresh_for(self, exercise: Exercise, tier: str) -> bool:
        """Still alive, and made from the suites as they are now."""
        return self.process.poll() is None and prepare_suites(exercise, tier) is self.prepared

    def discard(self) -> None:
        self.end()

    def end(self) -> tuple[bytes, int | None]:
        """Stop the harness (whatever it left), remove its folder, release its account: what it printed."""
        if isinstance(self.process, ForkedHarness):
            self.process.kill()  # its confinement ends with it (bwrap --die-with-parent)
        else:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()
        try:
            self.output.seek(0)
            printed = self.output.read()
            if isinstance(self.process, ForkedHarness) and self.process.lost:
                printed += self.process.fork_server.log_tail()  # the fork server died before forking it: why
        finally:
            if isinstance(self.process, ForkedHarness):
                self.process.release()
            self.output.close()
            remove_owned_folder(self.base)
            if self.settings.isolation in ("none", "account") and self.settings.user is not None:
                sweep_account(self.settings.user)
            self.account.close()
        return printed, self.process.returncode


def harness_paths() -> list[str]:
    """Where this interpreter finds pytest and its plugins (its path, with what site folders and their
    .pth files added), so that the harness starts with -S: no .pth file runs in it, which also saves
    their start-up on every grading."""
    return [entry for entry in sys.path[1:] if entry and os.path.exists(entry)]


def job_folder(settings: WorkerSettings) -> Path:
    """A fresh folder for a job. Namespaced workers never see it, so it sits in this user's private
    folder; without namespaces the worker's account must pass through to pub/, so it sits in the
    temporary folder."""
    private = settings.isolation == "namespaces" or settings.user is None
    return make_job_folder(jobs_root() if private else None)


def harness_command(base: Path, *options: str) -> list[str]:
    return [sys.executable, "-I", "-S", "-c",
            bootstrap(str(HARNESS_PACKAGE.parent), "grader.harness.__main__", "main", harness_paths()),
            str(base), *options]


def send_job(process: subprocess.Popen[bytes], layout: JobLayout, close: bool = False) -> None:
    try:
        assert process.stdin is not None
        process.stdin.write(harness_input(layout))
        process.stdin.flush()
        if close:
            process.stdin.close()
    except BrokenPipeError:
        pass  # it died at once: the run will say so


def start_harness(exercise: Exercise, tier: str, settings: WorkerSettings,
                  account: contextlib.ExitStack) -> StartedHarness:
    """Start the harness in a fresh job folder and hand it the job; it gets ready on its own."""
    base = job_folder(settings)
    try:
        prepared = prepare_suites(exercise, tier)
        layout = build_layout(exercise, tier, settings)
        output = tempfile.TemporaryFile(dir=base)
        process = subprocess.Popen(harness_command(base), stdin=subprocess.PIPE, stdout=output,
                                   stderr=subprocess.STDOUT, cwd=base, env=HARNESS_ENV, start_new_session=True)
    except BaseException:
        remove_owned_folder(base)
        raise
    started = StartedHarness(process, base, output, layout, prepared, settings, account)
    send_job(process, layout)
    return started


FORK_SERVER_END_S = 2.0  # how long a harness that ended without results waits to see its fork server's end
FORK_SERVER_EXIT_S = 120.0  # ... and how long, once the fork server is seen ending, for that end to complete


def _ended(process: subprocess.Popen) -> bool:
    """Whether a fork server has ended. Its harnesses end with it (the kernel signals them as it exits), which
    the host may see before the fork server's own end can be collected: a moment is given for that (its
    status may also be taken by another thread, which `wait` does not wait for), and as long as it
    takes for a fork server that the kernel is ending (a busy machine slows an exit down, never stops it)."""
    started = time.monotonic()
    while True:
        try:
            process.wait(timeout=0.05)
            return True
        except subprocess.TimeoutExpired:
            pass
        waited = time.monotonic() - started
        if waited >= (FORK_SERVER_EXIT_S if process_ending(process.pid) else FORK_SERVER_END_S):
            return False


def start_fork_server(exercise: Exercise, tier: str, settings: WorkerSettings) -> HarnessForkServer:
    base = job_folder(settings)
    os.mkdir(base / FORK_SERVER_RUNS, 0o700)  # not in the job's tar: the host's, made before the fork server unpacks
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        prepared = prepare_suites(exercise, tier)
        layout = build_layout(exercise, tier, settings)
        log = tempfile.TemporaryFile(dir=base)
        process = subprocess.Popen(harness_command(base, "--fork-server", str(theirs.fileno())), stdin=subprocess.PIPE,
                                   stdout=log, stderr=subprocess.STDOUT, cwd=base, env=HARNESS_ENV,
                                   start_new_session=True, pass_fds=(theirs.fileno(),))
    except BaseException:
        ours.close()
        remove_owned_folder(base)
        raise
    finally:
        theirs.close()
    send_job(process, layout, close=True)
    return HarnessForkServer(process, base, log, layout, prepared, settings, ours)


def finish_harness(started: StartedHarness, exercise: Exercise, source: bytes, run: Run,
                   then: Callable[[], None] | None = None) -> RawRun:
    """Send the submission with its run to a started harness and collect what it printed. `then` runs
    once the submission is on its way (a warm pool starts the next sandbox there)."""
    began = time.monotonic()
    timed_out = False
    process = started.process
    if isinstance(process, ForkedHarness) and not process.resolve():
        # No harness took the order: the submission goes nowhere (and is graded elsewhere).
        started.end()
        raise ForkServerLost(process.fork_server.refusal or "the harness fork server did not fork in time")
    try:
        try:
            assert process.stdin is not None
            process.stdin.write(run_input(run, source))
            process.stdin.close()
        except BrokenPipeError:
            pass
        if then is not None:
            try:
                then()
            except Exception:
                pass
        try:
            if isinstance(process, ForkedHarness):
                process.wait(exercise.limits.hard_stop_s)
            else:
                wait_for_exit(process, exercise.limits.hard_stop_s)
        except subprocess.TimeoutExpired:
            timed_out = True
    finally:
        printed, status = started.end()
    return RawRun(output=printed, exit_status=status, timed_out=timed_out,
                  isolation=started.settings.isolation,
                  duration_s=time.monotonic() - began)
