"""Loops forever inside C code that holds the GIL and never checks for signals.
expect: timeout

`deque(itertools.repeat(None), maxlen=0)` consumes an endless iterator entirely in C: no Python
signal handler, alarm or watchdog thread inside the worker gets to run (SIGINT cannot stop it).
Only a kill from outside the worker ends it.
"""

import itertools
from collections import deque


def _spin_in_c():
    deque(itertools.repeat(None), maxlen=0)


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
            _spin_in_c()  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        _spin_in_c()

    def complete(self, plan):
        _spin_in_c()
