"""schedule() and complete() each take 0.2 s: slow, well within the call limit, and correct."""

import time

_schedule, _complete = Scheduler.schedule, Scheduler.complete


def _slow_schedule(self):
    time.sleep(0.2)
    return _schedule(self)


def _slow_complete(self, plan):
    time.sleep(0.2)
    return _complete(self, plan)


Scheduler.schedule, Scheduler.complete = _slow_schedule, _slow_complete
