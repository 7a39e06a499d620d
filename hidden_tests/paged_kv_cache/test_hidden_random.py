"""Premium suite: generated sequences of calls (fixed seeds), checked after every call against the
reference."""

import os
import sys

import pytest

HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # the helper module sits next to this file
from _kv_helpers import PROFILES, check, random_scenario  # noqa: E402


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_random_calls_match_the_reference(ns, reference, feedback, profile):
    """Generated calls of a server, step by step: every call's effect matches the rules."""
    for seed in (1, 2, 3):
        check(ns, reference, feedback, random_scenario(reference, seed, profile),
              about=f"a generated sequence of calls ({profile.replace('_', ' ')}, seed {seed})", shrink=True)
