"""Raises SystemExit (sys.exit(0), exit(), raise SystemExit) from its calls.
expect: failed, crashed

SystemExit is a BaseException, not an Exception: a worker loop that only catches Exception exits
with status 0. Either the worker reports it as an exception (failed) or it dies (crashed).
"""

import sys
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
            raise SystemExit("all tests passed")  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        sys.exit(0)

    def complete(self, plan):
        exit(0)  # the site builtin, another road to SystemExit
