"""A fork server with the submission already imported, so that a test's worker skips the import.

Importing a submission in every test's worker costs its module's execution (a dataclass alone compiles
and runs generated code) and the copy-on-write faults that come with it, in every worker, more for a
larger file (docs/benchmarks.md has the figure). Once the submission has been imported successfully in a
worker, the zygote forks a *loader*: a child that imports it once, checks that the import left nothing
a fork would not carry over as a fresh import would, and from then on forks each test's worker in its
place. Every test still gets a process of its own, forked from the state right after the import, with
its own session, folder, output and pipes (`forking.become_worker`).

The loader runs the submission's code, so nothing it says is trusted beyond what a worker could do: it
lives in the worker's confinement, as the worker's user, under the worker's limits, in the zygote's
process group (ending the confinement ends it) and dies with the zygote. The zygote checks that each
pid it reports is the loader's own child, times out a loader that does not answer, and then, as when
the loader finds its import unclean or is gone, forks the workers itself as before. The harness sees no
difference: it still talks to the zygote only.

An import counts as clean when it left no thread, child process, open file, output, file in the
loader's folder, signal handler, blocked signal, timer, trace or profile hook, and rebound no function
of the standard modules the loader itself calls: each of those would not be the same in a forked
worker as after a fresh import (a thread does not survive a fork, an open file would be shared by
every test's worker), or would run the submission's code in the loader's own loop. A submission that
does any of these is imported by each worker, as before.

Messages on the loader's socket (`control`): the zygote orders forks, each with its worker's folder and
pipes; the loader says once whether its import was clean, answers each fork with a pid, or with why it
could not fork (then it ends), and says whenever one of its workers ends.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from grader.confined import control
from grader.confined.clock import OwnDeadline, process_charge, process_state
from grader.confined.forking import PR_SET_PDEATHSIG, ChildWatch, become_worker, parent_of, prctl, settle

# A fork order is answered at once by a loader that works. One that has not answered is given up when it
# has ended or was stopped, or when it has spent FORK_LIMIT_S of its own time on the order (its CPU and
# its sleeps; not what it waited for a CPU that other work held: see `clock`). A fork by the zygote
# itself follows, so the worst a slow loader costs is time.
FORK_LIMIT_S = 5.0
CHECK_S = 0.5
IMPORT_TIMEOUT_S = 5.0  # for the import; past it the loader is ended
TIMERS = (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)


class LoaderGone(Exception):
    """The loader did not answer as it should: the zygote ends it and forks the workers itself. With
    `sent`, a fork order had reached it: a worker of its own may hold that order's pipes, so they cannot
    be handed to another (the zygote refuses that order, and the harness starts a new confinement)."""

    def __init__(self, reason: str, sent: bool = False) -> None:
        super().__init__(reason)
        self.sent = sent


class Loader:
    """The zygote's handle on its loader."""

    def __init__(self, pid: int, sock: socket.socket, env: dict[str, str], module: str, account: int | None) -> None:
        self.pid, self.sock = pid, sock
        self.account = account  # whose processes' CPU is the submission's (clock.process_charge), if any
        self.env, self.module = env, module  # what every worker it forks gets
        self.ready = False
        # Inside the confinement no control group can be read: these deadlines move by their length at most.
        self.import_clock = OwnDeadline(IMPORT_TIMEOUT_S, process_charge(lambda: self.pid, self.account))
        self.workers: set[int] = set()

    @property
    def deadline(self) -> float:
        """When the import is given up (its own time: a loader starved of CPU is given more wall time)."""
        return time.monotonic() + self.import_clock.left()

    def serves(self, request: dict[str, Any]) -> bool:
        return self.ready and request.get(control.ENV) == self.env and request.get(control.MODULE) == self.module

    def fork(self, folder: str, fds: list[int], on_exit: Any) -> int:
        """Have the loader fork a worker; its pid, once checked to be the loader's child. Exit notes that
        arrive meanwhile go to `on_exit(pid, code)`."""
        try:
            control.send(self.sock, {control.OP: control.FORK, control.FOLDER: folder}, fds)
        except OSError as exc:
            raise LoaderGone(str(exc)) from None
        deadline = OwnDeadline(FORK_LIMIT_S, process_charge(lambda: self.pid, self.account))
        while True:
            try:
                message = self.receive(deadline)
                if control.PID not in message and control.FAILED not in message:
                    self.note(message, on_exit)
                    continue
            except LoaderGone as gone:
                raise LoaderGone(str(gone), sent=True) from None
            if control.FAILED in message:  # nothing was forked: the order's pipes are still free
                raise LoaderGone(f"it could not fork: {str(message[control.FAILED])[:200]}")
            pid = message[control.PID]
            # Checked before anyone acts on it: outside a PID namespace the harness signals it.
            if type(pid) is not int or pid in self.workers or parent_of(pid) != self.pid:
                raise LoaderGone(f"a pid that is not its child: {pid!r}", sent=True)
            self.workers.add(pid)
            return pid

    def note(self, message: dict[str, Any], on_exit: Any) -> None:
        """Take a message that came unasked: the import's outcome, or a worker's end."""
        if control.LOADED in message and not self.ready:
            if message[control.LOADED] is not True:
                raise LoaderGone("its import was not clean")
            self.ready = True
        elif control.EXIT in message and message[control.EXIT] in self.workers \
                and type(message.get(control.CODE)) is int:
            self.workers.discard(message[control.EXIT])
            on_exit(message[control.EXIT], message[control.CODE])
        else:
            raise LoaderGone(f"an unexpected message: {str(message)[:100]}")

    def receive(self, deadline: OwnDeadline | None = None) -> dict[str, Any]:
        while deadline is not None and not select.select([self.sock], [], [], max(0.0, min(CHECK_S, deadline.left())))[0]:
            if process_state(self.pid) in (None, "T", "t", "Z", "X"):
                raise LoaderGone("it ended or was stopped")
            if deadline.left() <= 0:
                raise LoaderGone(f"it did not answer within {FORK_LIMIT_S:g} s of its own time")
        try:
            data = self.sock.recv(4096)
            if not data:
                raise LoaderGone("it closed its socket")
            return control.decode(data)
        except (OSError, ValueError) as exc:
            raise LoaderGone(str(exc)) from None

    def end(self) -> None:
        """Kill the loader (its workers, in sessions of their own, live on until their tests end them)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.sock.close()


def start(worker: Any, children: ChildWatch, channel: socket.socket, request: dict[str, Any],
          processes: int | None, folder: str, submission: str, code: Any, account: int | None) -> Loader:
    """Fork the loader (from the zygote): it imports the submission with the environment of `request`,
    the fork order that showed the import works."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            _serve(worker, children, channel, theirs, request, processes, folder, submission, code)
        finally:
            os._exit(0)
    theirs.close()
    return Loader(pid, ours, request[control.ENV], request[control.MODULE], account)


def _unnamed_file(folder: str) -> int:
    try:
        return os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o600)
    except OSError:  # a file system without O_TMPFILE (an older overlayfs): a named one, unlinked at once
        path = os.path.join(folder, f".output-{os.getpid()}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.unlink(path)
        return fd


def _serve(worker: Any, children: ChildWatch, channel: socket.socket, sock: socket.socket,
           request: dict[str, Any], processes: int | None, folder: str, submission: str, code: Any) -> None:
    children.forget()
    channel.close()
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Standard output is a file of no name in its folder that shows whether the import printed anything
    # (no memory file: the confinement refuses memfd_create); the socket is 3.
    settle(_unnamed_file(folder), [sock.detach()], folder, request[control.ENV], processes)
    sock = socket.socket(fileno=3)
    before = _traces(folder)
    module = None
    try:
        loaded = worker.Worker(submission, request[control.MODULE], -1, -1, code)
        loaded.import_submission()
        module = loaded.module
    except BaseException:  # its workers import it themselves and report what it raised
        pass
    clean = module is not None and _traces(folder) == before
    control.send(sock, {control.LOADED: clean})
    if not clean:
        return
    # What the import made lives as long as every worker: out of the collector's sight, as in the zygote.
    gc.freeze()
    own = ChildWatch()
    watched: list[socket.socket | ChildWatch] = [sock, own]
    loader = os.getpid()
    while True:
        ready, _, _ = select.select(watched, [], [])
        if own in ready:
            for pid, status in own.ended():
                control.send(sock, {control.EXIT: pid, control.CODE: status})
        if sock in ready:
            data, fds, _, _ = socket.recv_fds(sock, 4096, 3)
            if not data:
                return  # the zygote is gone
            order = control.decode(data)
            try:
                pid = os.fork()
            except OSError as exc:  # the account's process limit, say: the zygote forks this one itself
                control.send(sock, {control.FAILED: str(exc)[:200]})
                return
            if pid == 0:
                become_worker(worker, loader, sock, own, request, fds, None, str(order[control.FOLDER]), submission,
                              code, module=module)
            control.send(sock, {control.PID: pid})
            for fd in fds:
                os.close(fd)


def _traces(folder: str) -> tuple[Any, ...]:
    """What an import may leave behind that a forked worker would not have as after a fresh import."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    me = os.getpid()
    return (
        sorted(os.listdir(f"/proc/{me}/task")),
        open(f"/proc/{me}/task/{me}/children").read(),
        sorted(os.listdir(f"/proc/{me}/fd")),
        os.fstat(1).st_size,
        sorted(os.listdir(folder)),
        os.getcwd(),
        [signal.getsignal(number) for number in signal.valid_signals()],
        sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        [signal.getitimer(timer) for timer in TIMERS],
        sys.gettrace(), sys.getprofile(),
        # The standard modules this loop and a worker's start call: a submission that rebinds one of
        # their functions would run its own code here (each of its workers then imports it instead).
        [dict(vars(module)) for module in (os, select, socket, json, signal, gc, time)],
    )

