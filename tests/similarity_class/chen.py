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

    def schedule(self) -> list[tuple[Req, int]]:
        return list(self._entries())

    def _entries(self):
        """Yield the plan entry by entry; stops as soon as the budget is gone."""
        budget = self.token_budget
        for req in self.running:
            if budget == 0:
                return
            if req.prefilled == req.prompt_len:
                budget -= 1
                yield req, 1
        for req in self.running:
            if budget == 0:
                return
            todo = req.prompt_len - req.prefilled
            if todo:
                chunk = min(todo, budget)
                budget -= chunk
                yield req, chunk
        while budget and self.waiting:
            head = self.waiting[0]
            size = head.prompt_len + head.max_new
            if len(self.running) == self.max_seqs or size > self.kv_tokens - self.reserved:
                return
            self.running.append(self.waiting.popleft())
            self.reserved += size
            chunk = min(head.prompt_len, budget)
            budget -= chunk
            yield head, chunk

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        return list(self._apply(plan))

    def _apply(self, plan):
        """Yield the ids that emitted a token."""
        for req, n in plan:
            if req.prefilled < req.prompt_len:
                req.prefilled = req.prefilled + n
                emits = req.prefilled == req.prompt_len
            else:
                emits = True
            if not emits:
                continue
            req.generated += 1
            yield req.rid
            if req.generated == req.max_new:
                self._retire(req)

    def _retire(self, req):
        self.running = [r for r in self.running if r is not req]
        self.reserved -= req.prompt_len + req.max_new
