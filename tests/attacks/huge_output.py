"""Prints about 250 MB to stdout and stderr in one call, then fails with a 16 MB exception message.
expect: failed, timeout, crashed

Captured output and messages must be capped; the worker either keeps going (failed), blocks on a
pipe nobody drains (timeout) or is stopped by a file-size limit (crashed). The grader's memory and
the scorecard's size must stay bounded.
"""

import os
import sys
from collections import deque

MIB = 1 << 20


def _flood():
    line = ("PASSED " * 15 + "\n").encode()
    chunk = line * (MIB // len(line))
    for _ in range(150):                # about 150 MB of short lines through os.write
        os.write(1, chunk)
    text = "x" * MIB
    for _ in range(50):                 # 50 MB as one line without a newline, through sys.stdout
        sys.stdout.write(text)
    sys.stdout.flush()
    for _ in range(50):                 # 50 MB on stderr
        os.write(2, chunk)
    raise RuntimeError("y" * (16 * MIB))


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
            _flood()  # raises RuntimeError where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        _flood()

    def complete(self, plan):
        _flood()
