"""Premium suite: generated sequences of calls, checked after every call against the reference.

The sequences are drawn from the `seed` fixture: derived from the submission's SHA-256 and a key kept
with this suite (grader/core/seeding.py), so each submission gets its own sequences and a regrade of the
same file gets the same ones.
"""

import pytest
from _kv_helpers import PROFILES, check, random_scenario


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_random_calls_match_the_reference(ns, reference, feedback, seed, profile):
    """Generated calls of a server, step by step: every call's effect matches the rules."""
    for i in (1, 2, 3):
        check(ns, reference, feedback, random_scenario(reference, f"{seed}/{i}", profile),
              about=f"a generated sequence of calls ({profile.replace('_', ' ')}, sequence {i} of 3)",
              shrink=True)
