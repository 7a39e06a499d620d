"""Correct, except that schedule() kills every process of its user once an 8,192-token prompt is partly
prefilled: its own worker, and the next test's, which was started while this test ran.

Only gradable where the worker runs as a user of its own (as root, or in Docker).
"""

import os
import signal

_schedule = Scheduler.schedule


def _schedule_with_a_crash(self):
    if any(r.prompt_len == 8192 and 0 < r.prefilled < r.prompt_len for r in self.running):
        try:
            os.kill(-1, signal.SIGKILL)  # every process of this user but this one
        except ProcessLookupError:
            pass  # none it may signal: in a namespace the fork server is PID 1, out of its reach
        os.kill(os.getpid(), signal.SIGKILL)
    return _schedule(self)


Scheduler.schedule = _schedule_with_a_crash
