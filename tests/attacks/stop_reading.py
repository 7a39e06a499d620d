"""Returns a 20,000-entry plan, then stops reading the pipe the grader sends the next call on.
expect: timeout

The plan comes back to complete() as a 20,000-entry argument, far more than a pipe buffers (its
entries are lists, which a test could change in place, so it goes back as a copy rather than as the
worker's own list), so the grader's send of that call can only finish if the worker reads. Replacing os.read makes the worker's
own loop sleep instead. The call's deadline must cover sending: the test ends as a timeout of
complete() within the call limit, not after the whole test's limit.
"""

import os
import time
from collections import deque
from dataclasses import dataclass


@dataclass
class Req:
    rid: int
    prompt_len: int
    max_new: int
    prefilled = generated = 0


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting = deque()

    def add(self, req):
        self.waiting.append(req)

    def schedule(self):
        os.read = lambda fd, size: time.sleep(3600)
        return [[self.waiting[0], 1]] * 20_000

    def complete(self, plan):
        return []
