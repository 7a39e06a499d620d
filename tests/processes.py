"""The processes a test starts, stopped whatever happens to the test, and checked gone.

A test registers each process it starts (`Started.track`); at the end, even when the test failed, each
is asked to stop (SIGTERM to its process group, or the signal given), killed with everything it
started after a grace period, and then looked for: a process that had to be killed, or that is
still there afterwards, is reported. Only the processes the test started count, with their
descendants as they were seen (found through /proc, each known by its pid and start time, so a pid
the system gave to another process since is never touched).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

GRACE_S = 20.0  # how long a process asked to stop may take before it is killed
SETTLE_S = 5.0  # how long what a stopped process started may take to end after it (a sandbox's own clean-up)


@dataclass(frozen=True)
class Known:
    """A process as seen once: its pid, and its start time, which a reused pid does not share."""
    pid: int
    started: int

    def alive(self) -> bool:
        found = stat_of(self.pid)
        return found is not None and found[1] == self.started and found[2] != "Z"

    def signal(self, signum: int) -> None:
        if self.alive():
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass


def stat_of(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, start time, state) of a process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # the name, in parentheses, may hold spaces
    return int(fields[1]), int(fields[19]), fields[0]


def descendants(roots: Iterable[int]) -> set[Known]:
    """The processes under `roots` now, the roots included."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := stat_of(int(entry.name))) is not None:
            children.setdefault(found[0], []).append(int(entry.name))
    seen: set[Known] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        found = stat_of(pid)
        if found is None or found[2] == "Z":
            continue
        seen.add(Known(pid, found[1]))
        todo.extend(children.get(pid, []))
    return seen


@dataclass
class Tracked:
    name: str
    current: Callable[[], subprocess.Popen | None]  # the process now (a server restarted is a new one)
    stop_signal: int


def send(process: subprocess.Popen, signum: int) -> None:
    """`signum` to a process, and to its process group when it leads one of its own (started with
    start_new_session): never to a group it shares with the tests."""
    try:
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
    except ProcessLookupError:
        pass


@dataclass
class Started:
    """What a test started; `close()` at its end (the `started` fixture does) stops all of it."""
    grace_s: float = GRACE_S
    tracked: list[Tracked] = field(default_factory=list)
    seen: set[Known] = field(default_factory=set)  # every descendant seen, to be found again at the end
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def track(self, name: str, current: subprocess.Popen | Callable[[], subprocess.Popen | None],
              stop_signal: int = signal.SIGTERM) -> None:
        """A process to stop at the end (with `stop_signal`): the Popen, or how to find the current one."""
        getter = (lambda: current) if isinstance(current, subprocess.Popen) else current
        self.tracked.append(Tracked(name, getter, stop_signal))

    def after(self, cleanup: Callable[[], None]) -> None:
        """Run once the processes are gone (close a log, remove a folder), whatever happened."""
        self.cleanups.append(cleanup)

    def find(self, name: str) -> Tracked:
        return next(t for t in self.tracked if t.name == name)

    def stop(self, name: str, grace_s: float | None = None) -> float | None:
        """Ask one process to stop as its owner would; the seconds it took, or None when it had to be
        killed (with everything it started) after the grace period."""
        tracked = self.find(name)
        process = tracked.current()
        if process is None or process.poll() is not None:
            return 0.0
        self.seen |= descendants([process.pid])
        began = time.monotonic()
        send(process, tracked.stop_signal)
        try:
            process.wait(timeout=self.grace_s if grace_s is None else grace_s)
            return time.monotonic() - began
        except subprocess.TimeoutExpired:
            self.kill(name)
            return None

    def kill(self, name: str) -> None:
        """SIGKILL a process and everything it started, as a machine that dies takes them all: each is
        stopped first (SIGSTOP), so that none starts another or is reparented out of sight meanwhile."""
        process = self.find(name).current()
        if process is None or process.poll() is not None:
            return
        frozen: set[Known] = set()
        while True:
            found = descendants([process.pid]) - frozen
            if not found:
                break
            for each in found:
                each.signal(signal.SIGSTOP)
            frozen |= found
        for each in frozen:
            each.signal(signal.SIGKILL)
            each.signal(signal.SIGCONT)  # a stopped process takes its SIGKILL at once; this changes nothing else
        process.wait()
        self.seen |= frozen

    def close(self) -> list[str]:
        """Stop everything, the last started first, then look for what is left: what had to be killed or
        could not be, one line each."""
        for tracked in reversed(self.tracked):
            process = tracked.current()
            if process is None or process.poll() is not None:
                continue
            try:
                if self.stop(tracked.name) is None:
                    self.problems.append(f"{tracked.name} (pid {process.pid}) did not stop within {self.grace_s:g} s "
                                         f"of signal {signal.Signals(tracked.stop_signal).name}: killed")
            except Exception as exc:  # stop the others all the same
                self.problems.append(f"stopping {tracked.name} failed: {exc!r}")
        left = {each for each in self.seen if each.alive()}
        deadline = time.monotonic() + SETTLE_S
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = {each for each in left if each.alive()}
        for each in left:
            self.problems.append(f"pid {each.pid} ({command_of(each.pid)}) outlived its parent: killed")
            each.signal(signal.SIGKILL)
        deadline = time.monotonic() + SETTLE_S
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = {each for each in left if each.alive()}
        self.problems += [f"pid {each.pid} ({command_of(each.pid)}) is still there after SIGKILL" for each in left]
        for tracked in self.tracked:
            process = tracked.current()
            if process is not None and process.poll() is not None:
                close_pipes(process)
        for cleanup in reversed(self.cleanups):
            try:
                cleanup()
            except Exception as exc:
                self.problems.append(f"a clean-up failed: {exc!r}")
        return self.problems


def close_pipes(process: subprocess.Popen) -> None:
    """Close the test's ends of the pipes to a process that has ended: nothing more comes through them."""
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:  # what was left to write to its stdin has nowhere to go
                pass


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "?"
