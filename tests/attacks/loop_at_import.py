"""Loops forever while being imported.
expect: timeout

The worker never becomes ready. Each test's import must hit its deadline, and the run as a whole
must still finish in bounded time.
"""

while True:
    pass


class Req:  # never reached
    pass


class Scheduler:  # never reached
    pass
