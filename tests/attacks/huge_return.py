"""Returns plain data that is hard to send: 5M ints, 200,000-deep nesting, a cycle, 100 MB strings.
expect: failed, timeout, crashed, error

Plain data can still be hostile: a message larger than any cap, nesting deeper than any JSON parser
recursion limit (a recursive decoder on the trusted side would overflow there), a cycle that a naive
converter follows forever, a dict with a million keys, a 100 MB string. Which one a test meets
depends on the size of the waiting queue. The trusted side must refuse by size/depth and never
crash itself.
"""

from collections import deque


def _flat():
    return list(range(5_000_000))


def _deep():
    value = [[1, 1]]
    for _ in range(200_000):
        value = [value]
    return value


def _cycle():
    plan = [("r", 1)]
    plan.append(plan)
    return plan


def _wide():
    return {str(i): i for i in range(1_000_000)}


def _long():
    return "L" * (100 << 20)


SHAPES = [_flat, _deep, _cycle, _wide, _long]


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        return SHAPES[len(self.waiting) % len(SHAPES)]()

    def complete(self, plan):
        return _cycle()
