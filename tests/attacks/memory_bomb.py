"""Allocates memory without end inside schedule(), complete() and add() (bytearray growth).
expect: failed, crashed

Every page is written, so both an address-space limit (MemoryError: failed, or the worker dies
reporting it: crashed) and a cgroup memory limit (the kernel kills it: crashed) are exercised. The
grader must name the cause ("out of memory") and the host must not feel it.
"""

from collections import deque

CHUNK = b"\x01" * (16 << 20)  # 16 MiB of written (not lazily zeroed) memory


def _grow():
    buf = bytearray()
    hoard = []
    while True:
        buf += CHUNK                  # one ever-growing buffer (realloc, then copy)
        hoard.append(bytes(CHUNK))    # and many separate chunks


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
            _grow()  # MemoryError where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        _grow()

    def complete(self, plan):
        _grow()
