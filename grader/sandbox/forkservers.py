"""The host's side of a harness fork server (see `grader.harness.forkserver`): ordering a harness for a
grading, and watching the forked harness through the pidfd the fork server sends.

A forked harness is the fork server's child, not the host's: it is watched and killed through its pidfd,
which cannot reach another process should its pid be reused, and its exit code comes as the
fork server's note. A submission is sent only once its harness exists (`ForkedHarness.resolve`).
"""

from __future__ import annotations

import dataclasses
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from grader.core.exercise import Exercise
from grader.harness.contract import control
from grader.sandbox.folders import remove_owned_folder
from grader.sandbox.layout import JobLayout, PreparedSuites, WorkerSettings, prepare_suites


@dataclass
class Order:
    """A harness the fork server forked (or was asked to fork) for one grading, with its folder and output."""

    process: ForkedHarness
    folder: Path
    output: IO[bytes]
    settings: WorkerSettings


FORK_SERVER_REPLY_S = 60.0  # how long a fork server may take to start, collect and fork (a busy machine)
FORK_SERVER_RUNS = "runs"  # in a fork server's job folder: the folder of each grading forked from it


@dataclass
class HarnessForkServer:
    """A harness that collected the tests of one exercise and tier and forks a harness per grading
    (see `harness.forkserver`). Its job folder holds each grading's own folder."""

    process: subprocess.Popen[bytes]
    base: Path
    log: IO[bytes]
    layout: JobLayout
    prepared: PreparedSuites
    settings: WorkerSettings
    channel: socket.socket
    orders: int = 0
    children: dict[int, tuple[int, int] | None] = field(default_factory=dict)  # order -> (pid, pidfd); None: refused
    exits: dict[int, int] = field(default_factory=dict)  # pid -> exit code
    abandoned: set[int] = field(default_factory=set)  # orders given up on: their harness is killed on sight
    refusal: str = ""  # why the fork server refused an order
    gone: bool = False

    def fresh_for(self, exercise: Exercise, tier: str) -> bool:
        return not self.gone and self.process.poll() is None and prepare_suites(exercise, tier) is self.prepared

    def order(self, user: int | None, group: int | None) -> Order | None:
        """A harness forked for one grading, waiting for its submission; None when the fork server is gone."""
        folder = Path(tempfile.mkdtemp(prefix="run-", dir=self.base / FORK_SERVER_RUNS))
        output = tempfile.TemporaryFile(dir=folder)
        run_r, run_w = os.pipe()
        self.orders += 1
        request = {control.ID: self.orders, control.PRIVATE: folder.relative_to(self.base).as_posix(),
                   control.USER: user, control.GROUP: group}
        settings = dataclasses.replace(self.settings, user=user, group=group)  # this grading's own account
        try:
            control.send(self.channel, request, [run_r, output.fileno()])
        except OSError:
            self.gone = True
            os.close(run_w)
            output.close()
            shutil.rmtree(folder, ignore_errors=True)
            return None
        finally:
            os.close(run_r)
        return Order(ForkedHarness(self, self.orders, os.fdopen(run_w, "wb")), folder, output, settings)

    def child(self, order: int) -> tuple[int, int] | None:
        """(pid, pidfd) of the harness forked for `order`, once the fork server says; None if it never will
        (then the order is abandoned: a harness forked for it later is killed when its pid comes)."""
        deadline = time.monotonic() + FORK_SERVER_REPLY_S
        while order not in self.children and self._next(deadline):
            pass
        found = self.children.pop(order, None)
        if found is None:
            self.abandoned.add(order)
            self.gone = True  # a fork server that does not fork in time is not used again
        return found

    def exit_code(self, pid: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while pid not in self.exits and self._next(deadline):
            pass
        return self.exits.pop(pid, None)

    def _next(self, deadline: float) -> bool:
        """File the fork server's next message; False when none came in time or the fork server is gone."""
        left = deadline - time.monotonic()
        if self.gone or left <= 0 or not select.select([self.channel], [], [], left)[0]:
            return False
        try:
            data, fds, _, _ = socket.recv_fds(self.channel, control.MAX_BYTES, 1)
            if not data:
                raise EOFError
            message = control.decode(data)
            if control.PID in message and fds:
                order, pidfd = int(message[control.ID]), fds.pop()
                if order in self.abandoned:
                    _kill_by_pidfd(pidfd)
                    os.close(pidfd)
                else:
                    self.children[order] = (int(message[control.PID]), pidfd)
            elif control.ERROR in message:
                self.children[int(message[control.ID])] = None
                self.refusal = str(message[control.ERROR])[:500]
            elif control.EXIT in message:
                self.exits[int(message[control.EXIT])] = int(message[control.CODE])
        except (OSError, EOFError, ValueError, KeyError, TypeError):
            self.gone = True
        for fd in fds:
            os.close(fd)
        return not self.gone

    def log_tail(self) -> bytes:
        try:
            self.log.seek(0)
            return self.log.read()[-8000:]
        except (OSError, ValueError):
            return b""

    def close(self) -> None:
        """End the fork server (its children are ended by their gradings) and remove its folder."""
        if self.abandoned:  # a harness forked late for an order given up on: its pid may be waiting
            self._next(time.monotonic() + 0.1)
        self.gone = True
        self.channel.close()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        for found in self.children.values():
            if found is not None:
                os.close(found[1])
        self.children.clear()
        self.log.close()
        remove_owned_folder(self.base)


class ForkServerLost(Exception):
    """The fork server did not fork the harness of an order: the submission was not sent to it."""


def _kill_by_pidfd(pidfd: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


class ForkedHarness:
    """A harness forked by a fork server, with the part of `subprocess.Popen`'s interface a grading uses.
    It is the fork server's child, not ours: it is watched and killed through a pidfd, which cannot
    reach another process should its pid be reused."""

    def __init__(self, fork_server: HarnessForkServer, order: int, stdin: IO[bytes]) -> None:
        self.fork_server, self.order, self.stdin = fork_server, order, stdin
        self.args = f"harness {order} of fork server {fork_server.process.pid}"
        self.pid: int | None = None
        self.pidfd: int | None = None
        self.lost = False  # the fork server never forked it
        self.ended = False
        self.returncode: int | None = None

    def _resolve(self) -> int | None:
        """Its pidfd, asked of the fork server the first time; None when the fork server never forked it."""
        if self.pidfd is None and not self.lost:
            found = self.fork_server.child(self.order)
            if found is None:
                self.lost = self.ended = True
            else:
                self.pid, self.pidfd = found
        return self.pidfd

    def poll(self) -> int | None:
        """None while it runs, else its exit code (-1 when unknown: its fork server is gone)."""
        if not self.ended and (pidfd := self._resolve()) is not None and select.select([pidfd], [], [], 0)[0]:
            self._ended()
        return None if not self.ended else (self.returncode if self.returncode is not None else -1)

    def wait(self, timeout: float | None = None) -> int | None:
        if not self.ended and (pidfd := self._resolve()) is not None:
            if not select.select([pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._ended()
        return self.returncode

    def _ended(self) -> None:
        self.ended = True
        assert self.pid is not None
        # The fork server reports each harness's end as soon as it reaps it; one that is gone reports nothing
        # and `exit_code` returns at once: a busy machine only delays the report.
        self.returncode = self.fork_server.exit_code(self.pid, FORK_SERVER_REPLY_S)

    def resolve(self) -> bool:
        """Whether the fork server forked this harness (waiting for its word if need be)."""
        return self._resolve() is not None

    def kill(self) -> None:
        if not self.ended and (pidfd := self._resolve()) is not None:
            _kill_by_pidfd(pidfd)

    def release(self) -> None:
        try:
            self.stdin.close()
        except OSError:
            pass
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
