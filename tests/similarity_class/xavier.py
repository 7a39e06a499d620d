"""Continuous batching: one step of a scheduler under a token budget.

Implement `Scheduler.schedule()` and `Scheduler.complete()`. `Req`, `Scheduler.__init__` and
`Scheduler.add()` are provided; keep their behaviour. The statement is in README.md.
"""

from __future__ import annotations

import functools
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

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        # Go through the plan and update the counters.
        result = []
        for item, cnt in plan:
            is_chunk = item.prefilled < item.prompt_len
            if is_chunk:
                item.prefilled += cnt
            if is_chunk and item.prefilled < item.prompt_len:
                continue
            item.generated += 1
            result.append(item.rid)
            if item.generated >= item.max_new:
                self.running.remove(item)
                self.reserved -= item.prompt_len + item.max_new
        return result

    def schedule(self) -> list[tuple[Req, int]]:
        # Build the batch in three stages.
        def stage_chunk(state, item):
            batch, budget = state
            if budget and item.prefilled < item.prompt_len:
                amt = min(item.prompt_len - item.prefilled, budget)
                batch.append((item, amt))
                return batch, budget - amt
            return state

        def stage_gen(state, item):
            batch, budget = state
            if budget and item.prefilled == item.prompt_len:
                batch.append((item, 1))
                return batch, budget - 1
            return state

        state = ([], self.token_budget)
        state = functools.reduce(stage_gen, self.running, state)
        state = functools.reduce(stage_chunk, self.running, state)
        batch, budget = state
        # Admission from the waiting queue.
        while budget > 0 and self.waiting:
            item = self.waiting[0]
            if len(self.running) >= self.max_seqs:
                break
            if item.prompt_len + item.max_new + self.reserved > self.kv_tokens:
                break
            self.waiting.popleft()
            self.running.append(item)
            self.reserved += item.prompt_len + item.max_new
            amt = min(item.prompt_len, budget)
            batch.append((item, amt))
            budget -= amt
        return batch
