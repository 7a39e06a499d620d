"""Continuous batching: one step of a scheduler under a token budget.

Implement `Scheduler.schedule()` and `Scheduler.complete()`. `Req`, `Scheduler.__init__` and
`Scheduler.add()` are provided; keep their behaviour. The statement is in README.md.
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

    def _try_admit(self):
        """Pop and return the head of the queue if it fits, else None."""
        if not self.waiting:
            return None
        head = self.waiting[0]
        if len(self.running) >= self.max_seqs:
            return None
        if self.reserved + head.prompt_len + head.max_new > self.kv_tokens:
            return None
        self.waiting.popleft()
        self.running.append(head)
        self.reserved += head.prompt_len + head.max_new
        return head

    def schedule(self) -> list[tuple[Req, int]]:
        gen, pre = [], []
        for r in self.running:
            (gen if r.prefilled == r.prompt_len else pre).append(r)
        budget = self.token_budget
        n_gen = min(len(gen), budget)
        plan = [(r, 1) for r in gen[:n_gen]]
        budget -= n_gen
        for r in pre:
            if budget == 0:
                break
            c = min(r.prompt_len - r.prefilled, budget)
            plan.append((r, c))
            budget -= c
        while budget > 0:
            r = self._try_admit()
            if r is None:
                break
            c = min(r.prompt_len, budget)
            plan.append((r, c))
            budget -= c
        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        ids = []
        for idx, (r, c) in enumerate(plan):
            before = r.prefilled
            if before < r.prompt_len:
                r.prefilled = before + c
            emitted = before == r.prompt_len or r.prefilled == r.prompt_len
            if emitted:
                r.generated += 1
                ids.append(r.rid)
            if r.generated == r.max_new:
                self.running.remove(r)
                self.reserved -= r.prompt_len + r.max_new
        return ids
