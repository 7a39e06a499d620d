"""Writes random bytes and absurd length prefixes to fds 3-64 at import; plausible wrong scheduler.
expect: failed, error

If one of those fds is the worker's reply pipe, the harness reads a 4 GiB or 2**63 length, or
bytes that are not JSON: it must not allocate that much or wait for that much, and it must not
mistake garbage for a reply. The writes stay small so they never block. The scheduler looks like an
attempt (it plans tokens for requests) but admits and decodes in the wrong order, never respects
the budget, never rejects an impossible request and never reports an emitted token.
"""

import os
import random
import struct
from collections import deque

_rng = random.Random(1234)
FRAMES = [
    struct.pack(">I", 0xFFFFFFFF),                 # 4 GiB, big-endian
    struct.pack("<I", 0xFFFFFFFF),                 # and little-endian
    struct.pack(">Q", 2**63 - 1),                  # 8-byte lengths
    struct.pack(">i", -1),                         # a negative length
    b"999999999999999999999:",                     # a netstring length
    bytes(_rng.randrange(256) for _ in range(512)),  # plain noise
    struct.pack(">I", 40) + b'{"ok": true, "value": "\xff\xfe not utf-8"}',
    b'{"ok": true, "value": ' + b"[" * 300 + b"\n",  # deep, unterminated JSON
]
for fd in range(3, 65):
    for frame in FRAMES:
        try:
            os.write(fd, frame)
        except OSError:
            break


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.token_budget = token_budget
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)  # wrong: no check for a request that can never fit

    def schedule(self):
        # Wrong: new arrivals before decodes, whole prompts regardless of the budget, and a
        # token count of budget + 1 for every decode.
        while self.waiting:
            self.running.insert(0, self.waiting.popleft())
        return [(r, (r.prompt_len - r.prefilled) or self.token_budget + 1) for r in self.running]

    def complete(self, plan):
        return []  # wrong: never reports an emitted token, never updates a request
