"""Correct but for one case: schedule() loops forever when max_seqs == 1.

Appended to the reference solution (tests/test_attacks.py). A hang costs only the tests that hang:
this program loses exactly the tests that reach a scheduler with max_seqs == 1, those of its control
(the same program raising there instead of looping), wherever they sit in the collection order, and
every other test runs and passes.
"""

_plain_schedule = Scheduler.schedule  # noqa: F821 - the reference's, above this


def _rarely_hangs(self):
    if self.max_seqs == 1:
        while True:  # the hang
            pass
    return _plain_schedule(self)


Scheduler.schedule = _rarely_hangs  # noqa: F821
