"""Time charged to a process: the wall time it took, less what it spent waiting for a CPU that work
of no grading held.

A limit on a submission (a call, an import, a test) is a limit on what the submission did: its CPU,
and the time it chose to sleep or block. On a busy machine (a course's server before a deadline) a
process also waits in the kernel's run queue for a CPU; Linux counts that wait per thread
(`/proc/PID/schedstat`, its second field), and a deadline here is moved back by part of it before it is
declared reached. A deadline is only ever moved later, never earlier, and by at most its own length
(`OwnDeadline`): whatever the readings say, a limit of L ends within 2 L on the wall clock.

The part credited is what no grading can have caused (docs/security.md has the proof): over an interval
in which the answering thread waited `w` and the processes of every grading this process can count used
`U` of CPU (besides the thread itself), the credit is `max(0, w - U)`. At each instant of its wait the
thread's CPU ran some other task; the instants at which that task was a grading's add up to at most
`U`, so at least `w - U` of the wait was spent behind work of no grading. What the gradings used is
proven by control groups (`cgroups`): every CPU second of every process a confinement ever started,
however it ended, of this grading's every lane and of every other grading whose groups this process
can read (`GroupCPU`). Without one, it is what `/proc` shows of the worker's account (`AccountCPU`),
which misses a process that started and ended between two readings unreaped by any of the account's.

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
    reading = thread_times(path)
    return None if reading is None else reading[1]


def thread_times(path: str) -> tuple[float, float] | None:
    """(the time it ran on a CPU, the time it waited in run queues) of the thread behind a `schedstat`
    file, since it started."""
    try:
        with open(path, "rb") as file:
            fields = file.read(200).split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
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
    """The CPU that every process of one account uses between two readings, as far as /proc shows it: a
    process seen for the first time counts with its own CPU since it started if it started after this
    count did, else from then on; one seen before with what it and the children it reaped used since. (A
    process that starts and ends between two readings, reaped by no process of the account, is missed.)"""

    includes_self = True  # the charged thread is one of the account's (a worker's)

    def __init__(self, uid: int) -> None:
        self.uid = uid
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
                    if entry.stat(follow_symlinks=False).st_uid != self.uid:
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


Counters = float | dict[str, float]


class GroupCPU:
    """The CPU that control groups' processes used between two readings. `read` gives their totals so far:
    one group's (a float), or several by name (a dict: a group first seen after the count began counts
    with all it used; one gone since the last reading, with nothing more). A reading that fails counts as
    all the time there was: nothing is credited then. `includes_self`: the charged thread is among the
    processes counted (a worker in its confinement's group, a harness in its container's)."""

    def __init__(self, read: Callable[[], Counters | None], includes_self: bool = True,
                 start: Callable[[], Counters | None] | None = None) -> None:
        """`start`: where the count's first totals come from, if not from `read` (a recent reading: an
        earlier start only counts more)."""
        self.read = read
        self.includes_self = includes_self
        self.totals = self._totals(start or read)

    @staticmethod
    def _totals(read: Callable[[], Counters | None]) -> dict[str, float] | None:
        totals = read()
        return {"": totals} if isinstance(totals, (int, float)) else totals

    def used(self) -> float:
        totals, before = self._totals(self.read), self.totals
        self.totals = totals
        if totals is None or before is None:
            return float("inf")
        return sum(max(0.0, total - before.get(name, 0.0)) for name, total in totals.items())


class CPUCount(Protocol):
    @property
    def includes_self(self) -> bool: ...

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
    """The credit one thread has earned by waiting for CPUs that work of no grading held, read when a
    deadline is reached.

    `locate` gives the thread's `schedstat` file as this process's /proc sees it (the thread that answers),
    and the pid whose CPU counts as the gradings' where no count is given (all its threads), or None
    while it cannot be found (then nothing is credited). `gradings` counts what the gradings' processes
    used (see `GroupCPU`, `AccountCPU`). Unless `baseline` is taken, the first reading covers the time
    since this charge was made, from zero: a process made just before."""

    def __init__(self, locate: Callable[[], tuple[str, int | str] | None], gradings: CPUCount | None = None) -> None:
        self.locate = locate
        self.gradings = gradings
        self.proven = isinstance(gradings, GroupCPU)  # the gradings' CPU comes from control groups
        self.credit = 0.0
        # A group count made just now has read its baseline (an account's count reads its first at `used`).
        self._counted_now = isinstance(gradings, GroupCPU)
        self._at = time.monotonic()
        self._ran = 0.0
        self._waited = 0.0
        self._cpu = 0.0

    def _read(self) -> tuple[float, float, float] | None:
        place = self.locate()
        if place is None:
            return None
        times = thread_times(place[0])
        cpu = process_cpu_s(place[1]) if self.gradings is None else 0.0
        return None if times is None or cpu is None else (*times, cpu)

    def _others(self, ran: float, cpu: float) -> float:
        """The CPU the gradings used since the last reading, besides the charged thread's own."""
        if self.gradings is None:  # the process's own other threads, all that is known
            return cpu - self._cpu - ran
        used = self.gradings.used()
        return used - ran if self.gradings.includes_self else used

    def baseline(self) -> Charge:
        """Count from now: what the thread waited before is not this charge's."""
        self._at = time.monotonic()
        reading = self._read()
        if reading is not None:
            self._ran, self._waited, self._cpu = reading
        if self.gradings is not None and not self._counted_now:
            self.gradings.used()
        self._counted_now = False
        return self

    def recheck(self) -> float:
        """Add what the thread waited behind work of no grading since the last reading; the new credit."""
        reading = self._read()
        if reading is None:
            return 0.0
        ran, waited, cpu = reading
        self._counted_now = False
        if waited < self._waited or ran < self._ran:
            # Counters that went back are another thread's (a forked copy of this process reads its own
            # as "thread-self"): they count from here.
            self._at, self._ran, self._waited, self._cpu = time.monotonic(), ran, waited, cpu
            if self.gradings is not None:
                self.gradings.used()
            return 0.0
        now = time.monotonic()
        others = self._others(ran - self._ran, cpu)
        # The kernel adds a wait to the counter when it ends: a wait that began before the last reading may
        # be counted in this one. No more than the interval less what the thread ran is taken.
        waits = min(waited - self._waited, (now - self._at) - (ran - self._ran))
        new = max(0.0, waits - max(0.0, others))
        self._at, self._ran, self._waited, self._cpu = now, ran, waited, cpu
        if new < MIN_CREDIT_S:
            return 0.0
        self.credit += new
        return new


def process_charge(pid: Callable[[], int | None], account: int | None = None,
                   group: Callable[[], CPUCount] | None = None) -> Charge:
    """The charge of another process (a worker, the loader), by its main thread's waits. What the
    gradings' processes used is not credited: with `group`, control groups' count (made now); else with
    `account`, what every process of that account visibly used; else the process's own other threads."""
    def locate() -> tuple[str, int] | None:
        found = pid()
        return None if found is None else (f"/proc/{found}/schedstat", found)
    return Charge(locate, group() if group is not None else AccountCPU(account) if account is not None else None)


def own_charge(group: Callable[[], CPUCount] | None = None) -> Charge:
    """The calling thread's own charge, counted from now (the harness's, for a test and the grading).
    With `group`, what the gradings' processes used is not credited: a harness that waits for the CPUs
    the submission keeps busy is not credited for it."""
    return Charge(lambda: ("/proc/thread-self/schedstat", "self"), group() if group is not None else None).baseline()


class Limit(Protocol):
    def left(self) -> float: ...


class Credited(Protocol):
    """What a deadline needs of a charge: the credit so far, and a reading now."""

    @property
    def credit(self) -> float: ...

    def recheck(self) -> float: ...


class OwnDeadline:
    """A deadline `limit` seconds from now on the charged clock of the processes in `charges`: it moves
    later by whatever they are credited (at this deadline's checks or anyone else's) after it was set, up
    to its own length (or `most`): the wall clock's hang guard, which no reading can move."""

    __slots__ = ("base", "charges", "end", "most")

    def __init__(self, limit: float, *charges: Credited, most: float | None = None) -> None:
        self.end = time.monotonic() + limit
        self.charges = charges
        self.base = sum(charge.credit for charge in charges)
        # Whatever the readings say (work hidden from /proc, gradings whose groups cannot be read from here),
        # a limit of L ends within 2 L on the wall clock: past that, no wait is credited.
        self.most = limit if most is None else min(most, limit)

    def _left(self) -> float:
        return self.end + self.credited() - time.monotonic()

    def credited(self) -> float:
        """How much later than its wall-clock end this deadline has moved so far."""
        return min(sum(charge.credit for charge in self.charges) - self.base, self.most)

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
