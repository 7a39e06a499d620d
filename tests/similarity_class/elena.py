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
        tokens = TokenPot(self.token_budget)
        plan: list[tuple[Req, int]] = []

        for req in self.running:
            if req.prefilled == req.prompt_len and tokens:
                plan.append((req, tokens.take(1)))

        for req in self.running:
            if req.prefilled < req.prompt_len and tokens:
                plan.append((req, tokens.take(req.prompt_len - req.prefilled)))

        while tokens and self.waiting:
            cand = self.waiting[0]
            seat_ok = len(self.running) < self.max_seqs
            kv_ok = self.reserved + cand.prompt_len + cand.max_new <= self.kv_tokens
            if not (seat_ok and kv_ok):
                break
            self.waiting.popleft()
            self.running.append(cand)
            self.reserved += cand.prompt_len + cand.max_new
            plan.append((cand, tokens.take(cand.prompt_len)))

        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        spoke = []
        for req, n in plan:
            if req.prefilled == req.prompt_len:
                req.generated += 1
                spoke.append(req)
            else:
                req.prefilled += n
                if req.prefilled == req.prompt_len:
                    req.generated += 1
                    spoke.append(req)
        for req in spoke:
            if req.generated == req.max_new:
                self.running.remove(req)
                self.reserved -= req.prompt_len + req.max_new
        return [req.rid for req in spoke]


class TokenPot:
    """What is left of one step's token budget."""

    def __init__(self, total: int) -> None:
        self.left = total

    def __bool__(self) -> bool:
        return self.left > 0

    def take(self, want: int) -> int:
        got = min(want, self.left)
        self.left -= got
        return got
