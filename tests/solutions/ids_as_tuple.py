"""complete() returns the ids as a tuple."""

_complete = Scheduler.complete
Scheduler.complete = lambda self, plan: tuple(_complete(self, plan))
