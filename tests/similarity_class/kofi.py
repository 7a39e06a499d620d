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
        # how many tokens each phase has spent so far
        spent = {"decode": 0, "prefill": 0, "admit": 0}
        plan = []

        def left():
            return self.token_budget - sum(spent.values())

        for rq in self.running:
            if left() == 0:
                break
            if rq.prefilled == rq.prompt_len:
                plan.append((rq, 1))
                spent["decode"] += 1
        for rq in self.running:
            if left() == 0:
                break
            if rq.prefilled < rq.prompt_len:
                n = min(rq.prompt_len - rq.prefilled, left())
                plan.append((rq, n))
                spent["prefill"] += n
        while left() > 0 and self.waiting:
            rq = self.waiting[0]
            if len(self.running) >= self.max_seqs or self.reserved + rq.prompt_len + rq.max_new > self.kv_tokens:
                break
            self.running.append(self.waiting.popleft())
            self.reserved += rq.prompt_len + rq.max_new
            n = min(rq.prompt_len, left())
            plan.append((rq, n))
            spent["admit"] += n
        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        emitted = {}  # rid -> request, in plan order
        for rq, n in plan:
            if rq.prefilled < rq.prompt_len:
                rq.prefilled += n
                if rq.prefilled == rq.prompt_len:
                    rq.generated += 1
                    emitted[rq.rid] = rq
            else:
                rq.generated += 1
                emitted[rq.rid] = rq
        finished = {rid: rq for rid, rq in emitted.items() if rq.generated >= rq.max_new}
        if finished:
            self.running = [rq for rq in self.running if finished.get(rq.rid) is not rq]
            self.reserved -= sum(rq.prompt_len + rq.max_new for rq in finished.values())
        return list(emitted)
