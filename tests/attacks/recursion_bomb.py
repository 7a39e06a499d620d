"""Recurses without end: a plain RecursionError, and a C-stack overflow with a 10**9 limit.
expect: failed, crashed, timeout

Which one a test meets depends on the size of the waiting queue. The plain recursion ends in a
RecursionError with a thousand-frame traceback (the report must show a bounded tail). The deep one
raises the recursion limit and then recurses through C (repr of a deeply nested list), which
overflows the C stack and kills the worker with SIGSEGV; on Pythons that guard the C stack it ends
as a RecursionError or MemoryError instead.
"""

import sys
from collections import deque


def _plain(n=0):
    return _plain(n + 1) + 1


def _deep():
    sys.setrecursionlimit(10**9)
    nested = []
    for _ in range(10**6):  # about 60 MB, far deeper than an 8 MB C stack allows
        nested = [nested]
    return repr(nested)  # C recursion, one C frame per level


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
            _plain()  # RecursionError (a RuntimeError) where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        if len(self.waiting) % 2:
            _deep()
        _plain()

    def complete(self, plan):
        _deep()
