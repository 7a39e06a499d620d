"""Freezes every process it can with SIGSTOP (kill(-1), parent, PID 1, each pid); answers wrongly.
expect: failed, timeout, error

DANGER: never import this outside the grader. If the worker runs as the same user as whoever
started the grading, every process of that user (your shell included) is stopped.

SIGSTOP cannot be caught: a stopped harness waits for nothing and never times out on its own. As
uid 65534 in a sandbox nothing but the worker's own children is reachable, and the plan it returns
is wrong (failed). If the harness were frozen, the outer wall-clock limit must end the grade.
"""

import os
import signal
from collections import deque


def _stop_all():
    me = os.getpid()
    targets = [-1, os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for pid in targets:
        if pid in (me, 0):
            continue
        for sig in (signal.SIGSTOP, signal.SIGTSTP):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        _stop_all()
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        _stop_all()
        return [("not a request", 0)]  # n = 0 is never a valid entry

    def complete(self, plan):
        _stop_all()
        return [-1]
