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
        used = 0
        cap = self.token_budget
        work = []
        for x in self.running:
            if used >= cap:
                break
            if x.prefilled == x.prompt_len:
                work.append((x, 1))
                used += 1
        for x in self.running:
            if used >= cap:
                break
            if x.prefilled < x.prompt_len:
                t = min(x.prompt_len - x.prefilled, cap - used)
                work.append((x, t))
                used += t
        while used < cap and self.waiting:
            x = self.waiting[0]
            r = x.prompt_len + x.max_new
            if len(self.running) < self.max_seqs and self.reserved + r <= self.kv_tokens:
                self.waiting.popleft()
                self.running.append(x)
                self.reserved += r
                t = min(x.prompt_len, cap - used)
                work.append((x, t))
                used += t
            else:
                break
        return work

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        talked = []
        for x, t in plan:
            if x.prefilled < x.prompt_len:
                x.prefilled += t
                if x.prefilled < x.prompt_len:
                    continue
            x.generated += 1
            talked.append(x.rid)
        # keep only those who still have tokens to produce
        self.running = [x for x in self.running if x.generated < x.max_new]
        self.reserved = sum(x.prompt_len + x.max_new for x in self.running)
        return talked
