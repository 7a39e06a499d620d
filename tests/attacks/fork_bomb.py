"""Forks without end inside schedule() (and add()); every child forks and spins too.
expect: timeout, crashed

Failed forks (at the pids limit) are ignored and retried, so every process keeps spinning. The call
never returns; the grader must kill the whole tree, free the pids for the next test's worker and
keep the host responsive.
"""

import os
from collections import deque


def _bomb():
    while True:
        try:
            os.fork()  # parent and child both continue in this loop
        except OSError:
            pass       # EAGAIN at the pids limit: spin and try again


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
            _bomb()  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        _bomb()

    def complete(self, plan):
        _bomb()
