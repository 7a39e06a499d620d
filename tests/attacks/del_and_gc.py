"""Plants objects whose __del__ (and a weakref finalizer and an atexit hook) call os._exit(0).
expect: failed, crashed, error

The bombs go off whenever the garbage collector or the end of the worker reaches them: inside a
call, in the middle of the worker writing its reply (gc thresholds are set so collection happens
on almost every allocation), or at exit, always with the "success" status 0. An exit status of
0 must never read as a pass, and a reply cut off in the middle must not be half-trusted. The plans
handed back are handles to bombs, never valid.
"""

import atexit
import gc
import os
import weakref
from collections import deque


class Bomb:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector can free it

    def __del__(self):
        os._exit(0)


def _plant(n=10):
    for _ in range(n):
        Bomb()                     # unreachable at once, freed at the next collection
    weakref.finalize(Bomb(), os._exit, 0)


atexit.register(os._exit, 0)       # a worker that exits "cleanly" exits with 0, skipping the rest
gc.set_threshold(1, 1, 1)          # collect on (almost) every allocation: the timing is the trick


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
            _plant()
            gc.collect()           # goes off right here, where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        gc.disable()
        _plant()                   # unreachable bombs, left for the collector
        plan = [(Bomb(), Bomb())]  # and the plan itself is made of bombs
        gc.enable()                # the next allocation is the worker's, building its reply
        return plan

    def complete(self, plan):
        _plant()
        gc.collect()
        return [-1]
