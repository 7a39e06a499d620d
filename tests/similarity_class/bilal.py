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

    def _kv_cost(self, req: Req) -> int:
        return req.prompt_len + req.max_new

    def _can_admit(self, req: Req) -> bool:
        if len(self.running) >= self.max_seqs:
            return False
        return self.reserved + self._kv_cost(req) <= self.kv_tokens

    def schedule(self) -> list[tuple[Req, int]]:
        left = self.token_budget
        decoding = [r for r in self.running if r.prefilled >= r.prompt_len]
        prefilling = [r for r in self.running if r.prefilled < r.prompt_len]
        plan = []
        for r in decoding:
            if not left:
                break
            plan.append((r, 1))
            left -= 1
        for r in prefilling:
            if not left:
                break
            n = min(r.prompt_len - r.prefilled, left)
            plan.append((r, n))
            left -= n
        while left and self.waiting and self._can_admit(self.waiting[0]):
            r = self.waiting.popleft()
            self.running.append(r)
            self.reserved += self._kv_cost(r)
            n = min(r.prompt_len, left)
            plan.append((r, n))
            left -= n
        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        finished = []
        ids = []
        for req, n in plan:
            was_prefill = req.prefilled < req.prompt_len
            if was_prefill:
                req.prefilled += n
            if not was_prefill or req.prefilled == req.prompt_len:
                req.generated += 1
                ids.append(req.rid)
            if req.generated >= req.max_new:
                finished.append(req)
        for req in finished:
            self.running.remove(req)
            self.reserved -= self._kv_cost(req)
        return ids
