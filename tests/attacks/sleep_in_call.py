"""Blocks without using CPU: sleeps, waits on an event, selects on nothing, pauses for a signal.
expect: timeout

A CPU-time limit never fires on a sleeping process; only the wall-clock deadline of the call does.
"""

import select
import signal
import threading
import time
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
            select.select([], [], [])  # where a ValueError belongs; blocks forever
        self.waiting.append(req)

    def schedule(self):
        while True:  # sleep again if a signal interrupts the sleep
            time.sleep(10**6)

    def complete(self, plan):
        threading.Event().wait()  # nobody will ever set it
        signal.pause()
