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
        ready = [r for r in self.running if r.prefilled == r.prompt_len]
        plan = [(r, 1) for r in ready[: self.token_budget]]
        left = self.token_budget - len(plan)
        for r in (r for r in self.running if r.prefilled < r.prompt_len):
            if left < 1:
                break
            plan.append((r, n := min(r.prompt_len - r.prefilled, left)))
            left -= n
        while left > 0 and self.waiting:
            w = self.waiting[0]
            if len(self.running) + 1 > self.max_seqs or self.reserved + w.prompt_len + w.max_new > self.kv_tokens:
                break
            self.running.append(self.waiting.popleft())
            self.reserved = sum(r.prompt_len + r.max_new for r in self.running)
            plan.append((w, n := min(w.prompt_len, left)))
            left -= n
        return plan

    @staticmethod
    def _advance(r: Req, n: int) -> bool:
        # True when r emits a token in this step
        if r.prefilled < r.prompt_len:
            r.prefilled += n
            if r.prefilled < r.prompt_len:
                return False
        r.generated += 1
        return True

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        talkers = [r for r, n in plan if self._advance(r, n)]
        gone = {id(r) for r in talkers if r.generated >= r.max_new}
        self.running = [r for r in self.running if id(r) not in gone]
        self.reserved = sum(r.prompt_len + r.max_new for r in self.running)
        return [r.rid for r in talkers]
