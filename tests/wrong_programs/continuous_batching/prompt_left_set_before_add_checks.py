"""I keep what is left of each prompt in a dict by id, and fill it at the top of add(), before add() checks the request.
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
        for name, value in (("token_budget", token_budget), ("max_seqs", max_seqs), ("kv_tokens", kv_tokens)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        self.token_budget = token_budget
        self.max_seqs = max_seqs
        self.kv_tokens = kv_tokens
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.reserved = 0
        self.prompt_left: dict[int, int] = {}  # rid -> prompt tokens not scheduled yet

    def add(self, req: Req) -> None:
        self.prompt_left[req.rid] = req.prompt_len
        if req.prompt_len < 1 or req.max_new < 1:
            raise ValueError("prompt_len and max_new must be at least 1")
        if req.prompt_len + req.max_new > self.kv_tokens:
            raise ValueError("the request can never fit in the KV cache")
        for r in list(self.waiting) + list(self.running):
            if r.rid == req.rid:
                raise ValueError(f"id {req.rid} is in use")
        self.waiting.append(req)

    def schedule(self) -> list[tuple[Req, int]]:
        plan: list[tuple[Req, int]] = []
        budget = self.token_budget
        for req in self.running:
            if budget and self.prompt_left[req.rid] == 0:
                plan.append((req, 1))
                budget -= 1
        for req in self.running:
            if budget and self.prompt_left[req.rid] > 0:
                n = min(self.prompt_left[req.rid], budget)
                plan.append((req, n))
                budget -= n
        while budget and self.waiting:
            head = self.waiting[0]
            if len(self.running) >= self.max_seqs or self.reserved + head.prompt_len + head.max_new > self.kv_tokens:
                break
            self.running.append(self.waiting.popleft())
            self.reserved += head.prompt_len + head.max_new
            n = min(head.prompt_len, budget)
            plan.append((head, n))
            budget -= n
        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        out: list[int] = []
        for req, n in plan:
            if self.prompt_left[req.rid] > 0:
                self.prompt_left[req.rid] -= n
                req.prefilled += n
                if self.prompt_left[req.rid] > 0:
                    continue
            req.generated += 1
            out.append(req.rid)
            if req.generated == req.max_new:
                self.running.remove(req)
                self.reserved -= req.prompt_len + req.max_new
        return out
