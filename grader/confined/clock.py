"""Time charged to a process: the wall time it took, less what it spent waiting for a CPU that other
work held.

A limit on a submission (a call, an import, a test) is a limit on what the submission did: its CPU,
and the time it chose to sleep or block. On a busy machine (a course's server before a deadline) a
process also waits in the kernel's run queue for a CPU; Linux counts that wait per thread
(`/proc/PID/schedstat`, its second field), and a deadline here is moved back by it before it is
declared reached. A deadline is only ever moved later, never earlier: the worst a wrong reading can
do is let a limit be reached later than it should, never fail a test sooner.

Waiting for a CPU that the submission's own work held is not credited: over any interval the time
charged is at least the CPU that the grading's processes used (capped at the interval's length), so a
submission that keeps its own threads or processes busy (a fork bomb, spinners at any nice value that
the kernel reaps) cannot stretch its limits that way. What "the grading's processes used" is proven by
a control group (`cgroups`): every CPU second of every process the confinement ever started, however it
ended (`GroupCPU`). Without one, it is what `/proc` shows of the worker's account (`AccountCPU`), which
misses a process that started and ended between two readings unreaped by any of the account's: then a
limit moves later by at most its own length (`Charge.proven`; a call limited to 5 s ends within 10 s).

Readings are taken lazily: only when a deadline is reached on the wall clock, which on an idle machine
is only when the limit really is reached. Where `/proc` has no schedstat (a kernel without it), no
credit is given and limits are wall time, as they were.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Protocol

# Credits smaller than this are not given: a process always waits a little now and then, and a deadline
# that moved by microseconds at every look would be looked at again and again.
MIN_CREDIT_S = 0.002
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def runqueue_wait_s(path: str) -> float | None:
    """The time the thread behind a `schedstat` file has waited in run queues since it started."""
    try:
        with open(path, "rb") as file:
            fields = file.read(200).split()
        return int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def process_cpu_s(pid: int | str) -> float | None:
    """The CPU (user and system) every thread of a process has used since it started."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read(2000)
        # The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
        fields = data[data.rindex(b")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, ValueError, IndexError):
        return None


def _cpu_fields(pid: int | str) -> tuple[float, float, float] | None:
    """(its own CPU, that of the children it reaped, when it started in seconds since boot) of a process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read(2000)
        fields = data[data.rindex(b")") + 2:].split()
        return ((int(fields[11]) + int(fields[12])) / _TICKS, (int(fields[13]) + int(fields[14])) / _TICKS,
                int(fields[19]) / _TICKS)
    except (OSError, ValueError, IndexError):
        return None


def _since_boot() -> float:
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return 0.0


class AccountCPU:
    """The CPU that every process of one account (with `others`: of every account but that one) uses
    between two readings, as far as /proc shows it: a process seen for the first time counts with its
    own CPU since it started if it started after this count did, else from then on; one seen before with
    what it and the children it reaped used since. (A process that starts and ends between two readings,
    reaped by no process of the account, is missed.)"""

    def __init__(self, uid: int, others: bool = False) -> None:
        self.uid, self.others = uid, others
        self.since = _since_boot()
        self.seen: dict[int, tuple[float, float]] = {}

    def used(self) -> float:
        now: dict[int, tuple[float, float]] = {}
        used = 0.0
        try:
            entries = os.scandir("/proc")
        except OSError:
            return 0.0
        with entries:
            for entry in entries:
                if not entry.name.isdigit():
                    continue
                try:
                    if (entry.stat(follow_symlinks=False).st_uid == self.uid) == self.others:
                        continue
                except OSError:
                    continue
                fields = _cpu_fields(entry.name)
                if fields is None:
                    continue
                pid, (own, reaped, started) = int(entry.name), fields
                now[pid] = (own, reaped)
                before = self.seen.get(pid)
                if before is not None:
                    used += max(0.0, own + reaped - sum(before))
                elif started >= self.since:
                    used += own  # a new process: all it used is of this count
        self.seen = now
        return used


class GroupCPU:
    """The CPU a control group's processes used between two readings (`read`: its total so far). Where
    the group holds processes of other accounts too (a container's own group: the harness, another
    lane), what those visibly used is taken off (`besides`: the worker's account); what of theirs
    cannot be seen stays counted, which only makes a deadline move less. A group that cannot be read
    counts as having used all the time there was: nothing is credited then."""

    def __init__(self, read: Callable[[], float | None], besides: int | None = None) -> None:
        self.read = read
        self.others = AccountCPU(besides, others=True) if besides is not None else None
        self.total = read()
        if self.others is not None:
            self.others.used()

    def used(self) -> float:
        total = self.read()
        if total is None or self.total is None:
            self.total = total
            return float("inf")
        used, self.total = total - self.total, total
        if self.others is not None:
            used -= self.others.used()
        return max(0.0, used)


class CPUCount(Protocol):
    def used(self) -> float: ...


def process_state(pid: int | str) -> str | None:
    """The state letter of a process (R, S, D, T, t, Z, X...), None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read(2000)
        return data[data.rindex(b")") + 2:][:1].decode()
    except (OSError, ValueError, IndexError):
        return None


PF_EXITING = 0x4  # a task's flag (the 9th field of /proc/PID/stat) from the start of its exit


def process_ending(pid: int | str) -> bool:
    """Whether a process has ended or is ending (the kernel is taking it down): it will not answer, and
    its end will be seen once the exit completes."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read(2000)
        fields = data[data.rindex(b")") + 2:].split()
        return fields[0] in (b"Z", b"X") or bool(int(fields[6]) & PF_EXITING)
    except (OSError, ValueError, IndexError):
        return True


class Charge:
    """The credit one process has earned by waiting for CPUs, read when a deadline is reached.

    `locate` gives the process as this process's /proc sees it: the `schedstat` file of the thread
    whose waits count (the one that answers) and the pid whose CPU counts (all its threads), or None
    while it cannot be found (then nothing is credited). Unless `baseline` is taken, the first
    reading covers the time since this charge was made, from zero: a process made just before."""

    def __init__(self, locate: Callable[[], tuple[str, int | str] | None], account: CPUCount | None = None) -> None:
        self.locate = locate
        self.account = account  # where given, the CPU of the whole account (or group) counts as the process's
        self.proven = isinstance(account, GroupCPU)  # the grading's CPU comes from a control group
        self.credit = 0.0
        self._at = time.monotonic()
        self._waited = 0.0
        self._cpu = 0.0

    def _read(self) -> tuple[float, float] | None:
        place = self.locate()
        if place is None:
            return None
        waited, cpu = runqueue_wait_s(place[0]), process_cpu_s(place[1])
        return None if waited is None or cpu is None else (waited, cpu)

    def _used(self, cpu: float) -> float:
        """The CPU used since the last reading: the account's, where known (and at least the process's)."""
        own = cpu - self._cpu
        return max(own, self.account.used()) if self.account is not None else own

    def baseline(self) -> Charge:
        """Count from now: what the process waited before is not this charge's."""
        self._at = time.monotonic()
        reading = self._read()
        if reading is not None:
            self._waited, self._cpu = reading
        if self.account is not None:
            self.account.used()
        return self

    def recheck(self) -> float:
        """Add what the process waited since the last reading; the new credit."""
        reading = self._read()
        if reading is None:
            return 0.0
        now = time.monotonic()
        waited, cpu = reading
        if waited < self._waited or cpu < self._cpu:
            # Counters that went back are another thread's (a forked copy of this process reads its own
            # as "thread-self"): they count from here.
            self._at, self._waited, self._cpu = now, waited, cpu
            return 0.0
        span, wait, used = now - self._at, waited - self._waited, self._used(cpu)
        self._at, self._waited, self._cpu = now, waited, cpu
        own = max(span - wait, min(used, span))
        new = span - own
        if new < MIN_CREDIT_S:
            return 0.0
        self.credit += new
        return new


def process_charge(pid: Callable[[], int | None], account: int | None = None,
                   group: Callable[[], CPUCount] | None = None) -> Charge:
    """The charge of another process (a worker, the loader), by its main thread's waits. What the
    grading's processes used counts as its CPU (the submission's own work): with `group`, a control
    group's count (made now); else with `account`, what every process of that account visibly used."""
    def locate() -> tuple[str, int] | None:
        found = pid()
        return None if found is None else (f"/proc/{found}/schedstat", found)
    return Charge(locate, group() if group is not None else AccountCPU(account) if account is not None else None)


def own_charge(group: Callable[[], CPUCount] | None = None) -> Charge:
    """The calling thread's own charge, counted from now (the harness's, for a test and the grading).
    With `group`, what the grading's processes used counts as its CPU too: a harness that waits for the
    CPUs the submission keeps busy is not credited for it."""
    return Charge(lambda: ("/proc/thread-self/schedstat", "self"), group() if group is not None else None).baseline()


class Limit(Protocol):
    def left(self) -> float: ...


class Credited(Protocol):
    """What a deadline needs of a charge: the credit so far, and a reading now."""

    @property
    def credit(self) -> float: ...

    @property
    def proven(self) -> bool: ...

    def recheck(self) -> float: ...


class OwnDeadline:
    """A deadline `limit` seconds from now on the charged clock of the processes in `charges`: it moves
    later by whatever they are credited (at this deadline's checks or anyone else's) after it was set."""

    __slots__ = ("base", "charges", "end", "most")

    def __init__(self, limit: float, *charges: Credited, most: float | None = None) -> None:
        self.end = time.monotonic() + limit
        self.charges = charges
        self.base = sum(charge.credit for charge in charges)
        if not all(charge.proven for charge in charges):
            # What the grading's processes used is not proven (no control group): a submission might hide
            # work from /proc, so this deadline moves later by at most its own length.
            most = limit if most is None else min(most, limit)
        self.most = most  # how much later it may move at most (None: no bound)

    def _left(self) -> float:
        return self.end + self.credited() - time.monotonic()

    def credited(self) -> float:
        """How much later than its wall-clock end this deadline has moved so far."""
        moved = sum(charge.credit for charge in self.charges) - self.base
        return moved if self.most is None else min(moved, self.most)

    def left(self) -> float:
        """The seconds left; when the wall clock says none, the processes' waits are read first."""
        left = self._left()
        if left <= 0 and self.charges and sum(charge.recheck() for charge in self.charges) > 0:
            left = self._left()
        return left


class Earliest:
    """The earlier of several deadlines."""

    __slots__ = ("deadlines",)

    def __init__(self, *deadlines: Limit) -> None:
        self.deadlines = deadlines

    def left(self) -> float:
        return min(deadline.left() for deadline in self.deadlines)
