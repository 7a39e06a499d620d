"""Earns "the machine was busy" credit from its own other lane, or its own other grading.
expect: timeout, failed

The first calls of each lane (or container) look at how busy the machine's CPUs are. Where they are
not all busy, the call is a *spinner*: it forks short-lived processes (SIGCHLD ignored, so the kernel
reaps them) that keep every CPU busy, and spins itself until its limit stops it. Where they are busy,
the call is a *waiter*: it lowers its thread to nice 19 and runs until 12 s have passed on the wall
clock, over twice its 5 s limit, all that time waiting for the CPUs the spinners hold. A grader that
credits waiting behind CPU that another lane of the same grading, or another grading, used (it counted
only the waiter's own group) lets the waiter run on: the call then raises, saying that it outlived its
limit. Each lane plays three times; its later calls return an empty plan at once (failed). The same
spinners in the waiter's own process or lane (`credit_gaming.py`, its control) earn nothing.
"""

import os
import signal
import threading
import time
from collections import deque

PLAYS = 3  # calls of each lane that play a part
WAIT_S = 12.0  # the waiter's run on the wall clock: past twice the 5 s call limit
_counter = os.path.join("/dev/shm", f"credit-plays-{os.getuid()}")


def _played():
    """How many calls of this lane played before (a file its lane's workers share)."""
    try:
        with open(_counter, "a+") as file:
            file.seek(0)
            count = len(file.read())
            file.write("x")
            return count
    except OSError:
        return PLAYS


def _busy_cpus():
    def sample():
        with open("/proc/stat") as file:
            fields = [int(v) for v in file.readline().split()[1:]]
        return sum(fields) - fields[3] - fields[4], sum(fields)

    busy, total = sample()
    time.sleep(0.2)
    busy2, total2 = sample()
    return (os.cpu_count() or 1) * (busy2 - busy) / max(1, total2 - total)


def _spinners():
    while True:
        try:
            pid = os.fork()
        except OSError:
            time.sleep(0.01)
            continue
        if pid == 0:
            end = time.monotonic() + 0.04
            while time.monotonic() < end:
                pass
            os._exit(0)
        time.sleep(0.035)


def _spin():
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps them: no CPU reaches the parent
    for _ in range(2 * (os.cpu_count() or 2)):
        threading.Thread(target=_spinners, daemon=True).start()
    while True:
        pass


def _wait():
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    started = time.monotonic()
    while time.monotonic() - started < WAIT_S:
        pass
    raise RuntimeError(f"this call ran {time.monotonic() - started:.0f} s and outlived its time limit")


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []
        self.playing = None

    def add(self, req):
        self.waiting.append(req)

    def schedule(self):
        if self.playing is None:
            self.playing = _played() < PLAYS
            if self.playing:
                if _busy_cpus() < (os.cpu_count() or 1) - 0.5:
                    _spin()
                _wait()
        return []

    def complete(self, plan):
        return []
