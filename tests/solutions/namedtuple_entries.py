"""Plan entries are a namedtuple, and complete() reads them by field name."""

from typing import NamedTuple


class Step(NamedTuple):
    req: Req
    n: int


_schedule, _complete = Scheduler.schedule, Scheduler.complete


def _steps(self):
    return [Step(req, n) for req, n in _schedule(self)]


def _complete_steps(self, plan):
    return _complete(self, [(step.req, step.n) for step in plan])


Scheduler.schedule, Scheduler.complete = _steps, _complete_steps
