"""schedule() refuses to plan again before complete() got its last plan: the engine's protocol, as the
statement gives it ("complete() always gets the very list the last schedule() returned, unchanged,
before the next schedule()"), checked by the solution itself."""

_schedule, _complete = Scheduler.schedule, Scheduler.complete


def _guarded_schedule(self):
    if getattr(self, "_pending", None) is not None:
        raise RuntimeError("schedule() called again before complete() of the previous plan")
    self._pending = plan = _schedule(self)
    return plan


def _guarded_complete(self, plan):
    self._pending = None
    return _complete(self, plan)


Scheduler.schedule, Scheduler.complete = _guarded_schedule, _guarded_complete
