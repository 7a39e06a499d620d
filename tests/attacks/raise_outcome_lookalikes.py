"""Raises exceptions named and moduled like pytest's outcomes (Skipped, XFailed, Exit, Failed).
expect: failed, crashed

If the trusted side rebuilt exceptions by name, or mapped them to pytest's own classes, a test
would end skipped, xfailed or the session would exit. The only honest result is a failure of the
test (or a crash of the worker for the BaseException ones). Which one a test meets depends on the
size of the waiting queue.
"""

from collections import deque


def _lookalike(name, base):
    cls = type(name, (base,), {})
    cls.__module__ = "_pytest.outcomes"
    cls.__qualname__ = name
    return cls


Skipped = _lookalike("Skipped", BaseException)
XFailed = _lookalike("XFailed", Exception)
Exit = _lookalike("Exit", BaseException)
Failed = _lookalike("Failed", BaseException)
Passed = _lookalike("Passed", AssertionError)
OutcomeException = _lookalike("OutcomeException", BaseException)
KINDS = [Skipped, XFailed, Exit, Failed, Passed, OutcomeException]


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
            raise Skipped("skipped: not applicable")  # where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        kind = KINDS[len(self.waiting) % len(KINDS)]
        err = kind("PASSED (reason: unconditional)")
        err.allow_module_level = True   # attributes pytest's Skipped carries
        err.msg, err.pytrace, err.returncode = "passed", False, 0
        raise err

    def complete(self, plan):
        raise XFailed("expected failure")
