"""Returns a plan whose token counts are ints of 5,000 digits: legal Python, and wrong.
expect: failed

Python 3.11 refuses to turn an int of more than 4,300 digits into text, so a worker that sends one as
JSON fails while replying. The test must fail for what the code did ("schedule() returned an int with
5,000 digits"), not for a worker that seemed to end by itself or to break the protocol.
"""

from collections import deque
from dataclasses import dataclass


@dataclass
class Req:
    rid: int
    prompt_len: int
    max_new: int
    prefilled: int = 0
    generated: int = 0


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running, self.reserved = deque(), [], 0

    def add(self, req):
        self.waiting.append(req)

    def schedule(self):
        return [(req, 10 ** 4999) for req in self.waiting]

    def complete(self, plan):
        return []
