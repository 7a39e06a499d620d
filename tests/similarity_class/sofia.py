"""Continuous batching: one step of a scheduler under a token budget.

Implement `Scheduler.schedule()` and `Scheduler.complete()`. `Req`, `Scheduler.__init__` and
`Scheduler.add()` are provided; keep their behaviour. The statement is in README.md.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
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

    @staticmethod
    def _is_decoding(req: Req) -> bool:
        return req.prefilled == req.prompt_len

    def schedule(self) -> list[tuple[Req, int]]:
        plan = [(req, 1) for req in islice(filter(self._is_decoding, self.running), self.token_budget)]
        left = self.token_budget - len(plan)
        for req in filter(lambda q: not self._is_decoding(q), self.running):
            if not left:
                return plan
            n = min(left, req.prompt_len - req.prefilled)
            plan.append((req, n))
            left -= n
        while left and self.waiting and len(self.running) < self.max_seqs:
            req = self.waiting[0]
            need = req.prompt_len + req.max_new
            if need > self.kv_tokens - self.reserved:
                break
            self.running.append(self.waiting.popleft())
            self.reserved += need
            n = min(left, req.prompt_len)
            plan.append((req, n))
            left -= n
        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        out = []
        for req, n in plan:
            if not self._is_decoding(req):
                req.prefilled += n
                if not self._is_decoding(req):
                    continue
            req.generated += 1
            out.append(req.rid)
        leaving = [req for req, _ in plan if req.generated == req.max_new]
        for req in leaving:
            self.running.remove(req)
        self.reserved -= sum(req.prompt_len + req.max_new for req in leaving)
        return out
