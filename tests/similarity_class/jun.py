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
        result = []
        avail = self.token_budget
        i = 0
        while i < len(self.running) and avail > 0:
            s = self.running[i]
            if s.prefilled == s.prompt_len:
                result.append((s, 1))
                avail -= 1
            i += 1
        i = 0
        while i < len(self.running) and avail > 0:
            s = self.running[i]
            if s.prefilled < s.prompt_len:
                amount = min(s.prompt_len - s.prefilled, avail)
                result.append((s, amount))
                avail -= amount
            i += 1
        admitting = True
        while admitting and avail > 0 and len(self.waiting) > 0:
            s = self.waiting[0]
            if len(self.running) < self.max_seqs and self.reserved + s.prompt_len + s.max_new <= self.kv_tokens:
                self.waiting.popleft()
                self.running.append(s)
                self.reserved += s.prompt_len + s.max_new
                amount = min(s.prompt_len, avail)
                result.append((s, amount))
                avail -= amount
            else:
                admitting = False
        return result

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        ids = []
        i = 0
        while i < len(plan):
            s, amount = plan[i]
            i += 1
            if s.prefilled < s.prompt_len:
                s.prefilled += amount
                if s.prefilled < s.prompt_len:
                    continue
            s.generated += 1
            ids.append(s.rid)
            if s.generated == s.max_new:
                j = 0
                while self.running[j] is not s:
                    j += 1
                self.running.pop(j)
                self.reserved -= s.prompt_len + s.max_new
        return ids
