"""I keep the ids in use in a set: add() puts the id in first, then checks the request, and complete() takes it out when the request finishes.
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
        self.ids_in_use: set[int] = set()

    def add(self, req: Req) -> None:
        if req.rid in self.ids_in_use:
            raise ValueError(f"a request with id {req.rid} is already waiting or running")
        self.ids_in_use.add(req.rid)
        if req.prompt_len < 1 or req.max_new < 1:
            raise ValueError("prompt_len and max_new must be at least 1")
        if req.prompt_len + req.max_new > self.kv_tokens:
            raise ValueError("the request can never fit in the KV cache")
        self.waiting.append(req)

    def schedule(self) -> list[tuple[Req, int]]:
        plan: list[tuple[Req, int]] = []
        left = self.token_budget

        # 1. Decodes first: one token each keeps every running sequence moving, whatever arrives.
        for req in self.running:
            if left == 0:
                break
            if req.prefilled == req.prompt_len:
                plan.append((req, 1))
                left -= 1

        # 2. Prompts already started continue before anyone new gets in.
        for req in self.running:
            if left == 0:
                break
            rest = req.prompt_len - req.prefilled
            if rest > 0:
                n = min(rest, left)
                plan.append((req, n))
                left -= n

        # 3. Admission, strictly in arrival order. The reservation covers the whole request
        #    (prompt and every output token), so an admitted request can never run out of KV.
        while left > 0 and self.waiting:
            head = self.waiting[0]
            need = head.prompt_len + head.max_new
            if len(self.running) >= self.max_seqs or self.reserved + need > self.kv_tokens:
                break  # head-of-line blocking: nobody behind the head may overtake it
            self.waiting.popleft()
            self.running.append(head)
            self.reserved += need
            n = min(head.prompt_len, left)
            plan.append((head, n))
            left -= n
        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        emitted: list[int] = []
        for req, n in plan:
            if req.prefilled < req.prompt_len:  # a prefill chunk
                req.prefilled += n
                if req.prefilled < req.prompt_len:
                    continue  # prompt not finished yet: nothing to emit
            # A decode, or the chunk that finished the prompt: the forward pass over the last
            # prompt token yields the first output token, so either way one token is emitted.
            req.generated += 1
            emitted.append(req.rid)
            if req.generated >= req.max_new:
                # Done: leave now, so the next schedule() can reuse the seat and the KV.
                self.running = [r for r in self.running if r is not req]
                self.reserved -= req.prompt_len + req.max_new
                self.ids_in_use.discard(req.rid)
        return emitted
