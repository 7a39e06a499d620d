"""A fork server for workers: one clean interpreter per run that forks a fresh worker per test.

Starting a Python interpreter for every test costs tens of milliseconds; forking a process that has
already started costs one or two. The zygote is started by the harness before any test, as the
worker's user and under the worker's limits, and it never imports a submission or anything secret:
each child imports the submission itself, after the fork, into a fresh session with its own pipes,
output file and folder. The zygote makes itself non-dumpable, so its children (same user) cannot
trace it or read its memory; if one kills or stops it anyway, the harness notices and goes back to
starting interpreters, and that submission only slows its own grading.

Messages on the zygote's socket (SOCK_SEQPACKET, JSON, file descriptors passed alongside):
    harness -> zygote   {"cwd", "env", "submission", "module"} + [to_worker_r, from_worker_w, output]
    zygote -> harness   {"pid": n}   once per request
                        {"exit": n, "code": c}   whenever a child ends (c as Popen.returncode)
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from grader.harness.limits import Limits
from grader.harness.processes import kill_group

BOOTSTRAP = ("import sys; sys.path.insert(0, {root!r}); "
             "from grader.harness.zygote import serve; serve()")
REPLY_TIMEOUT_S = 2.0
PR_SET_DUMPABLE = 4


class ZygoteUnavailable(Exception):
    """The zygote did not answer; start workers the slow way."""


# -- the zygote process ------------------------------------------------------------------------------

def serve() -> None:
    from grader.harness import worker  # imported once here, inherited by every child

    config = json.loads(sys.argv[-1])
    limits = dict(config["limits"])
    processes = limits.pop("processes", None)
    worker.apply_limits(limits)  # the process limit is set in each child: it counts this user's processes
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    channel = socket.socket(fileno=config["fd"])
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        ready, _, _ = select.select([channel, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            _report_exits(channel)
        if channel in ready:
            try:
                data, fds, _, _ = socket.recv_fds(channel, 65536, 3)
            except OSError:
                os._exit(0)
            if not data:
                os._exit(0)  # the harness is gone
            request = json.loads(data)
            pid = os.fork()
            if pid == 0:
                _become_worker(worker, channel, (wake_r, wake_w), request, fds, processes)
            for fd in fds:
                os.close(fd)
            channel.send(json.dumps({"pid": pid}).encode())


def _report_exits(channel: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _become_worker(worker: Any, channel: socket.socket, wake: tuple[int, int], request: dict[str, Any],
                   fds: list[int], processes: int | None) -> None:
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        channel.close()
        for fd in wake:
            os.close(fd)
        to_worker_r, from_worker_w, output = fds
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        # The two pipe ends become 3 and 4; every other descriptor is closed.
        os.dup2(to_worker_r, 3)
        os.dup2(from_worker_w, 4)
        os.closerange(5, 65536)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if processes:
            import resource

            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        worker.Worker(request["submission"], request["module"], 3, 4).serve()
    finally:
        os._exit(0)


# -- the harness's side --------------------------------------------------------------------------------

class Zygote:
    def __init__(self, *, python: str, harness_root: str, limits: Limits, cwd: str, log_path: str,
                 user: int | None, group: int | None, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {"fd": theirs.fileno(), "limits": limits.for_worker()}
        privileges: dict[str, Any] = {"user": user, "group": group, "extra_groups": []} if user is not None else {}
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [python, "-I", "-u", "-X", "faulthandler", "-c", BOOTSTRAP.format(root=harness_root), json.dumps(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                pass_fds=(theirs.fileno(),), start_new_session=True, **privileges)
        theirs.close()
        self.channel = ours
        self.exits: dict[int, int] = {}
        self.broken = False

    def fork(self, *, cwd: str, env: dict[str, str], submission: str, module: str,
             fds: tuple[int, int, int]) -> "ForkedProcess":
        if self.broken:
            raise ZygoteUnavailable("the zygote is gone")
        request = json.dumps({"cwd": cwd, "env": env, "submission": submission, "module": module}).encode()
        try:
            socket.send_fds(self.channel, [request], list(fds))
            deadline = time.monotonic() + REPLY_TIMEOUT_S
            while True:
                message = self._next(deadline)
                if "pid" in message:
                    return ForkedProcess(self, int(message["pid"]))
        except (OSError, ValueError, KeyError, TypeError, ZygoteUnavailable) as exc:
            self.close()
            raise ZygoteUnavailable(str(exc)) from None

    def _next(self, deadline: float) -> dict[str, Any]:
        """The next message; exit notes are filed in `exits` and returned too."""
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.channel], [], [], left)[0]:
            raise ZygoteUnavailable("the zygote did not answer in time")
        data = self.channel.recv(65536)
        if not data:
            raise ZygoteUnavailable("the zygote closed its socket")
        message = json.loads(data)
        if not isinstance(message, dict):
            raise ValueError("a message that is not an object")
        if "exit" in message:
            self.exits[int(message["exit"])] = int(message["code"])
        return message

    def exit_code(self, pid: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while pid not in self.exits and not self.broken:
            try:
                self._next(deadline)
            except (ZygoteUnavailable, OSError, ValueError, KeyError, TypeError):
                if time.monotonic() >= deadline:
                    return None
                self.broken = True
        return self.exits.get(pid)

    def close(self) -> None:
        self.broken = True
        try:
            self.channel.close()
        except OSError:
            pass
        kill_group(self.process)


class ForkedProcess:
    """A worker forked by the zygote, with the part of `subprocess.Popen`'s interface the client uses."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote, self.pid = zygote, pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.pid, 0)
            if self.returncode is None and not _alive(self.pid):
                self.returncode = self.zygote.exit_code(self.pid, 0.5)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.pid, timeout if timeout is not None else 3600)
        if self.returncode is None:
            if not _alive(self.pid):
                self.returncode = -signal.SIGKILL  # reaped, but its note was lost with the zygote
                return self.returncode
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
        return self.returncode


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
