"""A harness fork server: one harness that has started, loaded the reference and collected the tests of
an exercise's tier, and forks a fresh harness for each grading.

Starting a harness costs CPU (Python, pytest and the suites' imports, the collection of the tests),
the same for every submission of a batch. A warm local backend starts one fork server per
exercise and tier; the fork server stops where a harness would wait for its submission (the tests
collected) and from then on only forks. Each child becomes an ordinary harness for one grading: its
own session, folder, output, worker account and worker confinement (the confinement is started after
the fork, so no two gradings share a zygote or a namespace). The fork server never receives a
submission, and no worker ever runs in it or beside it.

Messages on the control socket (SOCK_SEQPACKET, JSON, descriptors passed alongside):
    host -> fork server   {"id": k, "private": P, "user": u, "group": g} + [run_r, output]
                       a grading: its own folder P (relative to the job's base, made by the host),
                       the worker account u/g, where its submission will come from and where its
                       output goes
    fork server -> host   {"id": k, "pid": n} + [pidfd]   the child that grades it
                       {"id": k, "error": why}          no child for that order (a fork that failed)
                       {"exit": n, "code": c}           whenever a child ends (c as Popen.returncode)
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
from dataclasses import dataclass
from typing import Any

from grader.confined import control
from grader.confined.forking import ChildWatch, die_with_parent


@dataclass
class Order:
    """What a forked child needs to become the harness of one grading."""

    private: str
    user: int | None
    group: int | None
    run_fd: int
    output_fd: int


def serve(control_fd: int) -> Order:
    """Fork a harness for each order until the host closes the socket (then leave). Returns only in
    a child, with its order."""
    channel = socket.socket(fileno=control_fd)
    children = ChildWatch()
    watched: list[socket.socket | ChildWatch] = [channel, children]
    fork_server = os.getpid()
    forked: set[int] = set()  # as a subreaper it also reaps orphans (a killed child's bwrap): not news
    while True:
        ready, _, _ = select.select(watched, [], [])
        if children in ready:
            for pid, code in children.ended():
                if pid not in forked:
                    continue
                forked.discard(pid)
                try:
                    control.send(channel, {control.EXIT: pid, control.CODE: code})
                except OSError:
                    os._exit(0)
        if channel not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(channel, control.MAX_BYTES, 2)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the host closed the fork server
        try:
            request = control.decode(data)
            order = Order(str(request[control.PRIVATE]), request.get(control.USER), request.get(control.GROUP),
                          fds[0], fds[1])
        except (ValueError, KeyError, IndexError, TypeError):
            for fd in fds:
                os.close(fd)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            _refuse(channel, request, fds, f"the fork server could not fork ({exc})")
            continue
        if pid == 0:
            die_with_parent(fork_server)  # a fork server that ends (its host gone) takes its gradings along
            children.forget()
            channel.close()
            return order
        for fd in fds:
            os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:  # no pidfds here (an old kernel, a filter): the host cannot watch it safely
            os.kill(pid, signal.SIGKILL)
            _refuse(channel, request, [], f"no pidfd for a forked harness ({exc})")
            continue
        forked.add(pid)
        try:
            control.send(channel, {control.ID: request.get(control.ID), control.PID: pid}, [pidfd])
        except OSError:
            os._exit(0)
        finally:
            os.close(pidfd)


def _refuse(channel: socket.socket, request: dict[str, Any], fds: list[int], why: str) -> None:
    """Tell the host this order gets no harness (it grades the submission some other way)."""
    for fd in fds:
        os.close(fd)
    try:
        control.send(channel, {control.ID: request.get(control.ID), control.ERROR: why})
    except OSError:
        os._exit(0)
