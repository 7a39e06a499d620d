"""Three loops in a row, one for each kind of entry, and complete() in one pass.
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

    def schedule(self) -> list[tuple[Req, int]]:
        budget = self.token_budget
        plan = []
        # decodes first, one token each
        for r in self.running:
            if budget <= 0:
                break
            if r.prefilled == r.prompt_len:
                plan.append((r, 1))
                budget -= 1
        # then prompts that are half done
        for r in self.running:
            if budget <= 0:
                break
            todo = r.prompt_len - r.prefilled
            if todo > 0:
                take = min(todo, budget)
                plan.append((r, take))
                budget -= take
        # then new requests, strictly in order
        while budget > 0 and len(self.waiting) > 0:
            r = self.waiting[0]
            cost = r.prompt_len + r.max_new
            if len(self.running) >= self.max_seqs:
                break
            if self.reserved + cost > self.kv_tokens:
                break
            self.waiting.popleft()
            self.running.append(r)
            self.reserved += cost
            take = min(r.prompt_len, budget)
            plan.append((r, take))
            budget -= take
        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        out = []
        for r, n in plan:
            if r.prefilled < r.prompt_len:
                r.prefilled += n
                if r.prefilled == r.prompt_len:
                    r.generated += 1
                    out.append(r.rid)
            else:
                r.generated += 1
                out.append(r.rid)
            if r.generated == r.max_new:
                self.running.remove(r)
                self.reserved -= r.prompt_len + r.max_new
        return out
