"""Sends SIGKILL to every process it can: kill(-1), its parent, PID 1, each /proc pid.
expect: failed, crashed, error

DANGER: never import this outside the grader. If the worker runs as the same user as whoever
started the grading, kill(-1, SIGKILL) kills every process of that user (your shell included).

As uid 65534 in a sandbox it should reach nothing but itself and its own children: the call then
raises with a count of what it hit (failed). If the harness dies, the outer grader must fail closed
(the test or the whole grade ends as error/crashed, never passed).
"""

import os
import signal
from collections import deque


def _kill_all():
    me, hits = os.getpid(), []

    def hit(what, fn, *args):
        try:
            fn(*args)
            hits.append(what)
        except OSError:
            pass

    hit("kill(-1)", os.kill, -1, signal.SIGKILL)       # Linux spares only the caller and init
    hit("ppid", os.kill, os.getppid(), signal.SIGKILL)
    hit("pid 1", os.kill, 1, signal.SIGKILL)
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) not in (me, 0):
            hit("pid " + pid, os.kill, int(pid), signal.SIGKILL)
    try:  # last: the parent's process group, which may be our own
        if os.getpgid(os.getppid()) != os.getpgid(0):
            hit("parent's group", os.killpg, os.getpgid(os.getppid()), signal.SIGKILL)
    except OSError:
        pass
    raise RuntimeError(f"signalled {len(hits)} targets: {', '.join(hits[:50])}")


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
            _kill_all()  # RuntimeError where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        _kill_all()

    def complete(self, plan):
        _kill_all()
