"""Which process made a thing that outlives processes (a grading container), whether it is gone, and
how often to look for such things.

An owner is named by this boot of the machine, its PID namespace, its pid and its start time (in clock
ticks since boot), so a pid reused by a later process never passes for the owner. An owner is known to
be gone only when it is of this boot and PID namespace and no live process matches it: anything else
(another machine's, another container's on a shared engine, made before a reboot, or unreadable) is
never taken for abandoned.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path


@functools.cache
def _here() -> str | None:
    """This boot of the machine and this PID namespace, in which pids mean something."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}:{namespace}"


def _start_time(pid: int) -> int | None:
    # The contract is imported here, not with this module: `grader grade` imports this module (through
    # `folders`) before it starts its harness, which waits for nothing the contract's imports do.
    from grader.harness.contract import START_TIME_FIELD, stat_number

    return stat_number(pid, START_TIME_FIELD)


def owner_of(pid: int) -> str:
    """A live process as an owner: `here/pid/start`, or "" where /proc cannot tell."""
    here, start = _here(), _start_time(pid)
    return f"{here}/{pid}/{start}" if here and start is not None else ""


def this_process() -> str:
    """This process as an owner. Not cached: a forked child (a queue's work horse) is an owner of its own."""
    return owner_of(os.getpid())


def is_gone(owner: str) -> bool:
    """Whether `owner` (from `this_process`, possibly another process's) has certainly ended."""
    try:
        here, pid, start = owner.split("/")
        return here == _here() and _start_time(int(pid)) != int(start)
    except ValueError:
        return False


_last: dict[str, float] = {}
_last_lock = threading.Lock()


def due(what: str, interval_s: float) -> bool:
    """Whether this process should look for `what` abandoned now: at most once every `interval_s`."""
    now = time.monotonic()
    with _last_lock:
        if what in _last and now - _last[what] < interval_s:
            return False
        _last[what] = now
        return True
