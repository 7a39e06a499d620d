"""A correct variant of the reference: the ids of the live requests kept in a set beside the queues.

The reference finds a duplicate id by walking both queues; this variant keeps `_live`, the ids waiting or
running, added to by `add()` and taken from by `complete()` when a request finishes, as many students
write it. The audit grades it (full marks) and makes mutants of it too: forgetting to take a finished
id out, or taking it out too early, are mistakes only this way of writing it can make.
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
        self._live: set[int] = set()  # the ids waiting or running

    def add(self, req: Req) -> None:
        if req.prompt_len < 1 or req.max_new < 1:
            # An empty prompt has no last token to emit from; max_new = 0 could never finish.
            raise ValueError(f"request {req.rid} needs prompt_len >= 1 and max_new >= 1, "
                             f"got {req.prompt_len} and {req.max_new}")
        need = req.prompt_len + req.max_new
        if need > self.kv_tokens:
            # It would block the head of the queue forever: refuse it now.
            raise ValueError(f"request {req.rid} needs {need} KV tokens but the cache holds {self.kv_tokens}")
        if req.rid in self._live:
            # complete() reports ids: two live requests with one id could not be told apart.
            raise ValueError(f"a request with id {req.rid} is already waiting or running")
        self._live.add(req.rid)
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
                self._live.discard(req.rid)
        return emitted
