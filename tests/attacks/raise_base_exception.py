"""Raises KeyboardInterrupt, GeneratorExit or a bare BaseException subclass from its calls.
expect: failed, crashed

If the harness re-raised a KeyboardInterrupt on the trusted side, pytest would stop the whole
session (the remaining tests never run); GeneratorExit and a custom BaseException slip past
`except Exception`. Which one a test meets depends on the size of the waiting queue.
"""

from collections import deque


class NotAnException(BaseException):
    """Derives from BaseException only: `except Exception` does not see it."""


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
            raise KeyboardInterrupt("stop the test run")  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        kinds = [KeyboardInterrupt, GeneratorExit, NotAnException]
        raise kinds[len(self.waiting) % 3]("interrupted")

    def complete(self, plan):
        raise GeneratorExit
