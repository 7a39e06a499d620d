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

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        # apply the finished pass
        out_ids = []

        for idx in range(len(plan)):
            q, cnt = plan[idx]
            if q.prefilled < q.prompt_len:
                q.prefilled += cnt
                if q.prefilled != q.prompt_len:
                    continue

            q.generated += 1
            out_ids.append(q.rid)

        pos = len(self.running) - 1
        while pos >= 0:
            q = self.running[pos]
            if q.generated >= q.max_new:
                del self.running[pos]
                self.reserved -= q.prompt_len + q.max_new
            pos -= 1
        return out_ids


    def schedule(self) -> list[tuple[Req, int]]:
        result = []
        tokens = self.token_budget
        count = len(self.running)
        for idx in range(count):
            if tokens == 0:
                break
            q = self.running[idx]
            if q.prefilled == q.prompt_len:
                result.append((q, 1))
                tokens -= 1
        for idx in range(count):
            if tokens == 0:
                break
            q = self.running[idx]
            missing = q.prompt_len - q.prefilled
            if missing != 0:
                part = missing if missing < tokens else tokens
                result.append((q, part))
                tokens -= part
        # now the queue
        while tokens > 0 and len(self.waiting) != 0:
            q = self.waiting[0]
            size = q.prompt_len + q.max_new
            if not (len(self.running) < self.max_seqs and self.reserved + size <= self.kv_tokens):
                break
            self.waiting.popleft()
            self.running.append(q)
            self.reserved = self.reserved + size
            part = q.prompt_len if q.prompt_len < tokens else tokens
            result.append((q, part))
            tokens -= part
        return result
