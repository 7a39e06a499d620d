"""Continuous batching: one step of a scheduler under a token budget.

Implement `Scheduler.schedule()` and `Scheduler.complete()`. `Req`, `Scheduler.__init__` and
`Scheduler.add()` are provided; keep their behaviour. The statement is in README.md.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum, auto


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

    def phase_of(self, req: Req) -> "Phase":
        return Phase.DECODE if req.prefilled >= req.prompt_len else Phase.PREFILL

    def schedule(self) -> list[tuple[Req, int]]:
        plan = []
        tokens_left = self.token_budget
        for wanted in (Phase.DECODE, Phase.PREFILL):
            for req in self.running:
                if tokens_left <= 0:
                    break
                if self.phase_of(req) is not wanted:
                    continue
                if wanted is Phase.DECODE:
                    size = 1
                else:
                    size = min(req.prompt_len - req.prefilled, tokens_left)
                plan.append((req, size))
                tokens_left -= size
        while tokens_left > 0 and self.waiting:
            req = self.waiting[0]
            if len(self.running) >= self.max_seqs:
                break
            if self.reserved + req.prompt_len + req.max_new > self.kv_tokens:
                break
            self.running.append(self.waiting.popleft())
            self.reserved += req.prompt_len + req.max_new
            size = min(req.prompt_len, tokens_left)
            plan.append((req, size))
            tokens_left -= size
        return plan

    def _on_prefill(self, req: Req, n: int) -> bool:
        req.prefilled += n
        if req.prefilled == req.prompt_len:
            req.generated += 1
            return True
        return False

    def _on_decode(self, req: Req, n: int) -> bool:
        req.generated += 1
        return True

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        handlers = {Phase.PREFILL: self._on_prefill, Phase.DECODE: self._on_decode}
        rids = []
        for req, n in plan:
            if handlers[self.phase_of(req)](req, n):
                rids.append(req.rid)
                if req.generated >= req.max_new:
                    self.running.remove(req)
                    self.reserved -= req.prompt_len + req.max_new
        return rids


class Phase(Enum):
    PREFILL = auto()
    DECODE = auto()
