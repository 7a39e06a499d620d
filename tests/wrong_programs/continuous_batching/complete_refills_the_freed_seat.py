"""When a request finishes in complete() I let the next waiting request take its seat right away, so no step is wasted.
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

    # -- helpers -------------------------------------------------------------------------------
    def _is_decoding(self, req: Req) -> bool:
        return req.prefilled >= req.prompt_len

    def _fits(self, req: Req) -> bool:
        seats_ok = len(self.running) < self.max_seqs
        kv_ok = self.reserved + req.prompt_len + req.max_new <= self.kv_tokens
        return seats_ok and kv_ok

    def _admit(self) -> Req:
        req = self.waiting.popleft()
        self.running.append(req)
        self.reserved += req.prompt_len + req.max_new
        return req

    def _release(self, req: Req) -> None:
        self.running = [r for r in self.running if r is not req]
        self.reserved -= req.prompt_len + req.max_new

    # -- the step ------------------------------------------------------------------------------
    def schedule(self) -> list[tuple[Req, int]]:
        plan: list[tuple[Req, int]] = []
        remaining = self.token_budget

        decoders = [r for r in self.running if self._is_decoding(r)]
        for req in decoders[:remaining]:
            plan.append((req, 1))
        remaining -= min(len(decoders), remaining)

        for req in self.running:
            if remaining == 0:
                break
            if not self._is_decoding(req):
                chunk = min(req.prompt_len - req.prefilled, remaining)
                plan.append((req, chunk))
                remaining -= chunk

        while remaining and self.waiting and self._fits(self.waiting[0]):
            req = self._admit()
            chunk = min(req.prompt_len, remaining)
            plan.append((req, chunk))
            remaining -= chunk
        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        emitted: list[int] = []
        for req, n in plan:
            if self._is_decoding(req):
                req.generated += 1
                emitted.append(req.rid)
            else:
                req.prefilled += n
                if self._is_decoding(req):
                    req.generated += 1
                    emitted.append(req.rid)
            if req.generated >= req.max_new:
                self._release(req)
                if self.waiting and self._fits(self.waiting[0]):
                    self._admit()  # it starts prefilling in the next step
        return emitted
