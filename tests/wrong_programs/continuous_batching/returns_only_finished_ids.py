"""complete() returns the ids of the requests that are done.
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

    PHASE_DECODE, PHASE_PREFILL, PHASE_NEW = 0, 1, 2

    def schedule(self) -> list[tuple[Req, int]]:
        budget = self.token_budget
        entries: list[tuple[Req, int]] = []

        def spend(req: Req, n: int) -> None:
            nonlocal budget
            entries.append((req, n))
            budget -= n

        for phase in (self.PHASE_DECODE, self.PHASE_PREFILL):
            for req in list(self.running):
                if budget == 0:
                    break
                left_in_prompt = req.prompt_len - req.prefilled
                if phase == self.PHASE_DECODE and left_in_prompt == 0:
                    spend(req, 1)
                elif phase == self.PHASE_PREFILL and left_in_prompt > 0:
                    spend(req, min(left_in_prompt, budget))

        while budget > 0 and self.waiting:
            head = self.waiting[0]
            need = head.prompt_len + head.max_new
            no_seat = len(self.running) >= self.max_seqs
            no_room = self.reserved + need > self.kv_tokens
            if no_seat or no_room:
                break
            self.waiting.popleft()
            self.running.append(head)
            self.reserved += need
            spend(head, min(head.prompt_len, budget))
        return entries

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        emitted: list[int] = []
        finished: list[Req] = []
        for req, n in plan:
            emits = True
            if req.prefilled < req.prompt_len:
                req.prefilled = req.prefilled + n
                emits = req.prefilled == req.prompt_len
            if emits:
                req.generated += 1
                if req.generated == req.max_new:
                    finished.append(req)
                    emitted.append(req.rid)
        for req in finished:
            self.running.remove(req)
            self.reserved -= req.prompt_len + req.max_new
        return emitted
