"""Ending and finding processes: what the harness does to workers and to what they leave behind."""

from __future__ import annotations

import os
import select
import signal
import subprocess
from typing import Any

from grader.confined.forking import parent_of


def kill_group(process: Any, timeout: float = 5.0) -> None:
    """SIGKILL the process's whole group (it leads its own session) and wait for it to be reaped.

    `process` is a `subprocess.Popen` or anything with its `pid` and `wait(timeout)`. The process
    itself is killed too: a worker just forked by the zygote may not have made its own session yet,
    and then no group carries its pid.
    """
    for kill, target in ((os.killpg, process.pid), (os.kill, process.pid)):
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass


def wait_for_exit(process: subprocess.Popen[Any], timeout: float) -> int:
    """`process.wait(timeout)`, woken by the exit itself (a pidfd) rather than by polling, which
    `Popen.wait` does with a timeout (every 50 ms at worst). Raises `subprocess.TimeoutExpired`."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # an older kernel, or already reaped
        return process.wait(timeout=timeout)
    try:
        if not select.select([pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(process.args, timeout)
    finally:
        os.close(pidfd)
    return process.wait()


def wait_for_any(pids: list[int], timeout: float) -> None:
    """Until one of `pids` has ended (and can be reaped) or `timeout` seconds have passed, woken by the
    ending itself (pidfds); at once when one cannot be watched (gone already, or no pidfds here)."""
    watched: list[int] = []
    try:
        for pid in pids:
            watched.append(os.pidfd_open(pid))
        select.select(watched, [], [], timeout)
    except (AttributeError, OSError):
        pass
    finally:
        for fd in watched:
            os.close(fd)


def children_of(parent: int) -> list[int]:
    """The pids whose parent is `parent`: from each of its threads' `children` list where the kernel
    keeps one (a few reads), else by scanning every process in /proc."""
    try:
        tasks = os.listdir(f"/proc/{parent}/task")
        children: list[int] = []
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children", "rb") as handle:
                    children.extend(int(pid) for pid in handle.read().split())
            except FileNotFoundError:  # a thread that ended meanwhile
                if os.path.exists(f"/proc/{parent}/task/{task}"):
                    raise
        return children
    except OSError:
        return _children_by_scan(parent)


def _children_by_scan(parent: int) -> list[int]:
    return [int(entry.name) for entry in os.scandir("/proc")
            if entry.name.isdigit() and parent_of(int(entry.name)) == parent]
