"""A prompt that's already started gets the rest of its prompt; only a new request's first chunk is cut to the budget.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass
class Req:
    rid: int
    prompt_len: int
    max_new: int
    prefilled: int = 0  # prompt tokens already processed
    generated: int = 0  # output tokens already emitted


class Scheduler:
    def __init__(self, token_budget: int, max_seqs: int, kv_tokens: int) -> None:
        # A limit of 0 would let nothing ever run: refuse it at once rather than loop forever.
        for name, value in (("token_budget", token_budget), ("max_seqs", max_seqs), ("kv_tokens", kv_tokens)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        self.token_budget = token_budget
        self.max_seqs = max_seqs
        self.kv_tokens = kv_tokens
        self.waiting: deque[Req] = deque()  # first come, first served
        self.running: list[Req] = []  # oldest first
        self.reserved = 0  # KV tokens reserved by the running requests

    def add(self, req: Req) -> None:
        if req.prompt_len < 1 or req.max_new < 1:
            # An empty prompt has no last token to emit from; max_new = 0 could never finish.
            raise ValueError(f"request {req.rid} needs prompt_len >= 1 and max_new >= 1, "
                             f"got {req.prompt_len} and {req.max_new}")
        need = req.prompt_len + req.max_new
        if need > self.kv_tokens:
            # It would block the head of the queue forever: refuse it now.
            raise ValueError(f"request {req.rid} needs {need} KV tokens but the cache holds {self.kv_tokens}")
        if any(r.rid == req.rid for r in (*self.waiting, *self.running)):
            # complete() reports ids: two live requests with one id could not be told apart.
            raise ValueError(f"a request with id {req.rid} is already waiting or running")
        self.waiting.append(req)

    def schedule(self):
        left = self.token_budget
        decode = []
        prefill = []
        for r in self.running:
            if r.prefilled == r.prompt_len:
                if left:
                    decode.append((r, 1))
                    left -= 1
        for r in self.running:
            rest = r.prompt_len - r.prefilled
            if rest and left:
                prefill.append((r, rest))
                left = max(0, left - rest)
        admitted = []
        while left and self.waiting:
            head = self.waiting[0]
            if len(self.running) == self.max_seqs or self.reserved + head.prompt_len + head.max_new > self.kv_tokens:
                break
            self.running.append(self.waiting.popleft())
            self.reserved += head.prompt_len + head.max_new
            n = min(head.prompt_len, left)
            admitted.append((head, n))
            left -= n
        return decode + prefill + admitted

    def complete(self, plan):
        done = set()
        ids = []
        for r, n in plan:
            was_prefill = r.prefilled < r.prompt_len
            if was_prefill:
                r.prefilled += n
            if not was_prefill or r.prefilled == r.prompt_len:
                r.generated += 1
                ids.append(r.rid)
                if r.generated == r.max_new:
                    done.add(id(r))
                    self.reserved -= r.prompt_len + r.max_new
        if done:
            self.running = [r for r in self.running if id(r) not in done]
        return ids
