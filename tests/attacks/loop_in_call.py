"""Loops forever inside schedule(), complete() and add().
expect: timeout

A plain Python busy loop: the call must miss its deadline, the worker be killed, and the other
tests still run.
"""

from collections import deque


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
            while True:  # where a ValueError belongs
                pass
        self.waiting.append(req)

    def schedule(self):
        n = 0
        while True:
            n += 1

    def complete(self, plan):
        while True:
            pass
