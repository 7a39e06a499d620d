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
        """Decide the work of the next forward pass: a list of `(req, n_tokens)`.

        Spend at most `self.token_budget` tokens, in this order. Every entry has `n_tokens >= 1`
        and a request appears at most once.

        1. Decodes: every running request whose prompt is fully prefilled
           (`prefilled == prompt_len`) gets 1 token, in `running` order (oldest first),
           while budget remains.
        2. Prefill continuation: every running request with prompt left gets
           `min(prompt_len - prefilled, budget left)` tokens, in `running` order, while budget
           remains.
        3. Admission: while budget remains, the head of `waiting` is admitted if
           `len(running) < max_seqs` and `reserved + prompt_len + max_new <= kv_tokens`.
           It moves to the end of `running`, its reservation (`prompt_len + max_new`) is taken
           now, and it gets `min(prompt_len, budget left)` tokens. The first head that does not
           fit stops admission for this step: requests behind it never jump ahead
           (head-of-line blocking).

        `schedule()` does not change `prefilled` or `generated`; `complete()` does. Keep `waiting`,
        `running` and `reserved` true after every call (they may be changed in place or replaced):
        the tests read them.
        """
        plan: list[tuple[Req, int]] = []
        budget = self._decode_phase(plan, self.token_budget)
        if budget:
            budget = self._prefill_phase(plan, budget)
        if budget:
            self._admission_phase(plan, budget)
        return plan

    def _decode_phase(self, plan: list[tuple[Req, int]], budget: int) -> int:
        """Give one token to every request that is generating; return the budget left."""
        ready = [req for req in self.running if req.prefilled == req.prompt_len]
        for req in ready[:budget]:
            plan.append((req, 1))
        return budget - min(budget, len(ready))

    def _prefill_phase(self, plan: list[tuple[Req, int]], budget: int) -> int:
        """Give the next chunk to every request still reading its prompt; return the budget left."""
        for req in self.running:
            if req.prefilled >= req.prompt_len:
                continue
            chunk = min(budget, req.prompt_len - req.prefilled)
            plan.append((req, chunk))
            budget -= chunk
            if budget == 0:
                break
        return budget

    def _fits(self, req: Req) -> bool:
        """Whether `req` has a seat and room in the KV cache right now."""
        return len(self.running) < self.max_seqs and self.reserved + req.prompt_len + req.max_new <= self.kv_tokens

    def _admission_phase(self, plan: list[tuple[Req, int]], budget: int) -> int:
        """Admit waiting requests in arrival order until one does not fit; return the budget left."""
        while budget and self.waiting and self._fits(self.waiting[0]):
            newcomer = self.waiting.popleft()
            self.running.append(newcomer)
            self.reserved += newcomer.prompt_len + newcomer.max_new
            chunk = min(budget, newcomer.prompt_len)
            plan.append((newcomer, chunk))
            budget -= chunk
        return budget

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        """Apply a plan that `schedule()` returned, once the step has run, entry by entry.

        - A prefill entry (the request still had prompt left) adds `n` to `prefilled`; if that
          finishes the prompt, the request emits its first output token (`generated += 1`).
        - A decode entry emits one token (`generated += 1`).
        - A request whose `generated` reaches `max_new` leaves `running`, and its reservation
          (`prompt_len + max_new`) is released at once, so the next `schedule()` can use it.

        `plan` is the very list the last `schedule()` returned, unchanged; `complete([])` returns `[]`.
        Return the ids (`rid`) of the requests that emitted a token in this step, as a list in plan
        order, each id once (the tests do not check the order).
        """
        emitted: list[int] = [req.rid for req, n in plan if self._emits(req, n)]
        for req, _ in plan:
            if req.generated == req.max_new:
                self._release(req)
        return emitted

    def _emits(self, req: Req, n: int) -> bool:
        """Apply one plan entry to `req`; True if it emitted an output token."""
        decoding = req.prefilled == req.prompt_len
        if not decoding:
            req.prefilled += n
        if decoding or req.prefilled == req.prompt_len:
            req.generated += 1
            return True
        return False

    def _release(self, req: Req) -> None:
        """Take a finished request out of `running` and give back its KV reservation."""
        self.running.remove(req)
        self.reserved -= req.prompt_len + req.max_new
