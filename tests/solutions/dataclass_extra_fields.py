"""Req is a dataclass with more fields than the statement's: a label, a priority, and a history list."""

from dataclasses import field


@dataclass
class Req:
    rid: int
    prompt_len: int
    max_new: int
    prefilled: int = 0
    generated: int = 0
    label: str = "request"
    priority: float = 0.5
    history: list = field(default_factory=list)
    tags: dict = field(default_factory=dict)


_complete = Scheduler.complete


def _complete_with_history(self, plan):
    for req, n in plan:
        req.history.append(n)
    return _complete(self, plan)


Scheduler.complete = _complete_with_history
