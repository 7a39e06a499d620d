"""Calls os._exit(0) while being imported: the worker vanishes with a "success" exit status.
expect: crashed

A naive runner that trusts exit status 0 would see a clean run. The worker never says it is ready,
so every test must end crashed, never passed.
"""

import os

os._exit(0)  # no cleanup, no exception, exit status 0


class Req:  # never reached
    pass


class Scheduler:  # never reached
    pass
