"""Raises exceptions whose __str__ loops, exits, returns 64 MB or a non-str, and endless chains.
expect: failed, timeout, crashed, error

The worker turns a student exception into type name, message and traceback lines, running student
code (__str__, __repr__, args, __cause__ chains) while it does. Which flavour a test meets depends
on the size of the waiting queue:
  0: __str__ and __repr__ loop forever;
  1: __str__ calls os._exit(0);
  2: __str__ returns a 64 MB string;
  3: __str__ returns an int (a TypeError while formatting);
  4: a __cause__ chain 100,000 exceptions long;
  5: a __context__ cycle, and an __str__ that raises another such exception.
"""

import os
from collections import deque


class Looping(Exception):
    def __str__(self):
        while True:
            pass

    __repr__ = __str__


class Exiting(Exception):
    def __str__(self):
        os._exit(0)

    __repr__ = __str__


class Huge(Exception):
    def __str__(self):
        return "H" * (64 << 20)


class NotAString(Exception):
    def __str__(self):
        return 42

    __repr__ = __str__


class Raising(Exception):
    def __str__(self):
        raise Raising()


def _long_chain():
    err = ValueError("the root cause")
    for i in range(100_000):
        nxt = RuntimeError(f"link {i}")
        nxt.__cause__ = err
        err = nxt
    return err


def _cycle():
    a, b = Raising(), Raising()
    a.__context__, b.__context__ = b, a
    return a


FLAVOURS = [Looping, Exiting, Huge, NotAString, _long_chain, _cycle]


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
            raise Looping()  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        raise FLAVOURS[len(self.waiting) % len(FLAVOURS)]()

    def complete(self, plan):
        raise Huge()
