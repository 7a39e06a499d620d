"""Crashes the interpreter with a segmentation fault inside schedule(), complete() and add().
expect: crashed

`ctypes.string_at(0)` reads address 0; `faulthandler._sigsegv()` and a self-sent SIGSEGV are the
fall-backs if ctypes is missing. The worker dies by signal mid-call.
"""

import os
import signal
from collections import deque


def _segfault():
    try:
        import ctypes
        ctypes.string_at(0)
    except ImportError:
        pass
    try:
        import faulthandler
        faulthandler._sigsegv()
    except (ImportError, AttributeError):
        pass
    os.kill(os.getpid(), signal.SIGSEGV)


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
            _segfault()  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        _segfault()

    def complete(self, plan):
        _segfault()
