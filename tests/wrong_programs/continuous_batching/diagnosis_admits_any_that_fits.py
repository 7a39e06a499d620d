"""Looks through the whole waiting list and admits every request that fits, even behind one that does not.

A wrong program written apart from the mutants, to measure the misconception diagnosis
(grader/diagnosis) on: tests/test_diagnosis_programs.py.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Req:
    rid: int
    prompt_len: int
    max_new: int
    prefilled: int = 0
    generated: int = 0


class Scheduler:
    def __init__(self, token_budget: int, max_seqs: int, kv_tokens: int) -> None:
        for name, value in (("token_budget", token_budget), ("max_seqs", max_seqs), ("kv_tokens", kv_tokens)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        self.token_budget = token_budget
        self.max_seqs = max_seqs
        self.kv_tokens = kv_tokens
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.reserved = 0

    def add(self, req: Req) -> None:
        if req.prompt_len < 1 or req.max_new < 1:
            raise ValueError("prompt_len and max_new must be at least 1")
        if req.prompt_len + req.max_new > self.kv_tokens:
            raise ValueError("the request can never fit in the KV cache")
        for other in self.waiting + self.running:
            if other.rid == req.rid:
                raise ValueError(f"request {req.rid} is already here")
        self.waiting.append(req)

    def _cost(self, req: Req) -> int:
        return req.prompt_len + req.max_new

    def schedule(self) -> list[tuple[Req, int]]:
        budget = self.token_budget
        plan: list[tuple[Req, int]] = []
        # 1. decodes
        decoding = [r for r in self.running if r.prefilled >= r.prompt_len]
        for r in decoding:
            if budget <= 0:
                break
            plan.append((r, 1))
            budget -= 1
        # 2. prompts in progress
        for r in self.running:
            if budget <= 0:
                break
            left = r.prompt_len - r.prefilled
            if left > 0:
                take = left if left < budget else budget
                plan.append((r, take))
                budget -= take
        # 3. admissions
        for r in list(self.waiting):
            if budget <= 0 or len(self.running) >= self.max_seqs:
                break
            if self.reserved + self._cost(r) > self.kv_tokens:
                continue
            self.waiting.remove(r)
            self.running.append(r)
            self.reserved += self._cost(r)
            take = r.prompt_len if r.prompt_len < budget else budget
            plan.append((r, take))
            budget -= take
        return plan

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        out: list[int] = []
        done: list[Req] = []
        for r, n in plan:
            if r.prefilled < r.prompt_len:
                r.prefilled = r.prefilled + n
                if r.prefilled == r.prompt_len:
                    r.generated = r.generated + 1
                    out.append(r.rid)
            else:
                r.generated = r.generated + 1
                out.append(r.rid)
            if r.generated == r.max_new:
                done.append(r)
        for r in done:
            self.running.remove(r)
            self.reserved -= self._cost(r)
        return out
