"""The harness process's life on this machine: started in a fresh job folder and handed its job,
sent the submission, waited for, ended with whatever it left, and its worker account swept.

The harness (trusted) runs as the grading user, in a session of its own, started as `interpreter` says
(possibly early, before its job was known); a warm backend forks it from a harness fork server
(grader.sandbox.forkservers) instead, and `finish_harness` treats both alike.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from grader.core.backend import RawRun
from grader.core.exercise import Exercise
from grader.harness.contract import Run, process_ending, wait_for_exit
from grader.sandbox.folders import make_job_folder, remove_owned_folder
from grader.sandbox.forkservers import FORK_SERVER_RUNS, ForkedHarness, ForkServerLost, HarnessForkServer
from grader.sandbox.interpreter import WaitingHarness, jobs_root, start_harness_process
from grader.sandbox.isolation import worker_python
from grader.sandbox.layout import (
    JobLayout,
    PreparedSuites,
    WorkerSettings,
    build_layout,
    harness_input,
    prepare_suites,
    run_input,
)

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
        if not isinstance(self.process, ForkedHarness) and self.process.stdin is not None:
            self.process.stdin.close()  # a harness discarded before its run still had it open
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


def job_parent(settings: WorkerSettings) -> Path | None:
    """Where a job's folder goes. Namespaced workers never see it, so it sits in this user's private
    folder; without namespaces the worker's account must pass through to pub/, so it sits in the
    temporary folder (None)."""
    private = settings.isolation == "namespaces" or settings.user is None
    return jobs_root() if private else None


def send_job(process: subprocess.Popen[bytes], layout: JobLayout, close: bool = False) -> None:
    try:
        assert process.stdin is not None
        process.stdin.write(harness_input(layout))
        process.stdin.flush()
        if close:
            process.stdin.close()
    except BrokenPipeError:
        pass  # it died at once: the run will say so


def start_harness(exercise: Exercise, tier: str, settings: WorkerSettings, account: contextlib.ExitStack,
                  waiting: WaitingHarness | None = None) -> StartedHarness:
    """Start the harness in a fresh job folder (or take `waiting`, one started early, where it fits) and
    hand it the job; it gets ready on its own."""
    parent = job_parent(settings)
    if waiting is not None and not waiting.claim(parent or Path(tempfile.gettempdir())):
        waiting = None
    base = waiting.base if waiting is not None else make_job_folder(parent)
    try:
        prepared = prepare_suites(exercise, tier)
        layout = build_layout(exercise, tier, settings, bytecode=True)  # the harness runs this Python
        if waiting is None:
            waiting = start_harness_process(base)
    except BaseException:
        if waiting is not None:
            waiting.claimed = False
            waiting.discard()
        else:
            remove_owned_folder(base)
        raise
    started = StartedHarness(waiting.process, base, waiting.output, layout, prepared, settings, account)
    send_job(waiting.process, layout)
    return started


FORK_SERVER_END_S = 2.0  # how long a harness that ended without results waits to see its fork server's end
FORK_SERVER_EXIT_S = 120.0  # ... and how long, once the fork server is seen ending, for that end to complete


def fork_server_ended(process: subprocess.Popen[bytes]) -> bool:
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
    base = make_job_folder(job_parent(settings))
    os.mkdir(base / FORK_SERVER_RUNS, 0o700)  # not in the job's tar: the host's, made before the fork server unpacks
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        prepared = prepare_suites(exercise, tier)
        layout = build_layout(exercise, tier, settings, bytecode=True)  # the harness runs this Python
        server = start_harness_process(base, "--fork-server", str(theirs.fileno()), pass_fds=(theirs.fileno(),))
    except BaseException:
        ours.close()
        remove_owned_folder(base)
        raise
    finally:
        theirs.close()
    send_job(server.process, layout, close=True)
    return HarnessForkServer(server.process, base, server.output, layout, prepared, settings, ours)


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
