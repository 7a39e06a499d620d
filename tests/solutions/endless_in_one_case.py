"""Correct, except that schedule() loops forever once an 8,192-token prompt is partly prefilled."""

_schedule = Scheduler.schedule


def _schedule_with_a_bug(self):
    while any(r.prompt_len == 8192 and 0 < r.prefilled < r.prompt_len for r in self.running):
        pass
    return _schedule(self)


Scheduler.schedule = _schedule_with_a_bug
