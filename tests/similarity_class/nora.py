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
           (head-of-line blocking). The requests admitted earlier in the same step count: they
           are in `running` and `reserved` from the moment they are admitted.

        `schedule()` does not change `prefilled` or `generated`; `complete()` does. Keep `waiting`,
        `running` and `reserved` true after every call (they may be changed in place or replaced):
        the tests read them.
        """
        raise NotImplementedError("schedule() is not implemented yet")

    def complete(self, plan: list[tuple[Req, int]]) -> list[int]:
        """Apply a plan that `schedule()` returned, once the step has run, entry by entry.

        - A prefill entry (the request still had prompt left) adds `n` to `prefilled`; if that
          finishes the prompt, the request emits its first output token (`generated += 1`).
        - A decode entry emits one token (`generated += 1`).
        - A request whose `generated` reaches `max_new` leaves `running`, and its reservation
          (`prompt_len + max_new`) is released at once, so the next `schedule()` can use it. The
          requests that stay keep their order in `running`.

        `plan` is the very list the last `schedule()` returned, unchanged: read it, leave it as it is
        (the engine keeps it). `complete([])` returns `[]`. `complete()` never admits anyone: a request
        added since the last `schedule()` waits for the next one.
        Return the ids (`rid`) of the requests that emitted a token in this step, as a list in plan
        order, each id once (the tests do not check the order).
        """
        raise NotImplementedError("complete() is not implemented yet")
