"""Closes or redirects the worker's file descriptors: its protocol pipes, stdout and stderr.
expect: failed, crashed, error, timeout

Which one a test meets depends on the size of the waiting queue:
  0: os.closerange(0, 4096): the worker can no longer read requests or write replies;
  1: dup2 of /dev/null over every fd from 0 to 64: replies vanish, requests read as EOF;
  2: dup2 of stdout over every fd from 3 to 64: replies go to the captured output, and the
     harness reads the worker's printed text where it waits for a reply;
  3: the worker's fds are swapped in pairs, so replies land on the request pipe.
The harness sees EOF, silence or garbage where a reply should be (or, if its pipes sit above fd 64,
nothing happens to them and the wrong plan fails the test).
"""

import os
from collections import deque


def _close_all():
    os.closerange(0, 4096)


def _null_all():
    null = os.open(os.devnull, os.O_RDWR)
    for fd in range(0, 65):
        if fd != null:
            try:
                os.dup2(null, fd)
            except OSError:
                pass


def _stdout_everywhere():
    for fd in range(3, 65):
        try:
            os.dup2(1, fd)
        except OSError:
            pass
    print('{"ok": true, "value": 448}', flush=True)


def _swap_pairs():
    fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    spare = 4000
    for a, b in zip(fds[::2], fds[1::2]):
        try:
            os.dup2(a, spare)
            os.dup2(b, a)
            os.dup2(spare, b)
        except OSError:
            pass


FLAVOURS = [_close_all, _null_all, _stdout_everywhere, _swap_pairs]


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
            _close_all()  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        FLAVOURS[len(self.waiting) % len(FLAVOURS)]()
        return [("not a request", 0)]  # n = 0 is never a valid entry

    def complete(self, plan):
        _close_all()
        return [-1]
