"""complete() returns the ids as a set."""

_complete = Scheduler.complete
Scheduler.complete = lambda self, plan: set(_complete(self, plan))
