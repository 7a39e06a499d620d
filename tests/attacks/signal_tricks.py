"""Ignores and blocks every catchable signal, disarms timers and freezes the clock, then loops.
expect: timeout

At import: SIGTERM, SIGINT, SIGHUP, SIGALRM, SIGXCPU, ... are ignored and then blocked; any alarm
or interval timer is cancelled; `signal.signal`, `signal.alarm`, `signal.setitimer` and the clocks
in `time` are replaced so that a deadline kept inside the worker never fires; it also tries to
leave its process group. Only SIGKILL from outside (or the whole sandbox going away) stops it.
"""

import os
import signal
import time
from collections import deque

for _sig in signal.valid_signals():
    if _sig in (signal.SIGKILL, signal.SIGSTOP):
        continue
    try:
        signal.signal(_sig, signal.SIG_IGN)
    except (OSError, RuntimeError, ValueError):
        pass
try:
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
except (OSError, ValueError):
    pass
signal.alarm(0)
for _timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
    signal.setitimer(_timer, 0)

# Whatever the worker tries afterwards is a no-op, and time stands still inside the worker.
signal.signal = lambda *a, **k: signal.SIG_IGN
signal.alarm = lambda *a, **k: 0
signal.setitimer = lambda *a, **k: (0.0, 0.0)
time.time = time.monotonic = time.perf_counter = lambda: 0.0

# Try to escape a kill of the process group (fails when the worker leads its own group).
for _escape in (os.setsid, lambda: os.setpgid(0, 0)):
    try:
        _escape()
    except OSError:
        pass


def _forever():
    while True:
        signal.alarm(0)


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.kv_tokens = kv_tokens
        self.waiting, self.running = deque(), []

    def add(self, req):
        if req.prompt_len + req.max_new > self.kv_tokens:
            _forever()  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        _forever()

    def complete(self, plan):
        _forever()
