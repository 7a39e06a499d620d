"""Exam: empty lists and a random list, against the reference."""

import random

import pytest


def test_empty_lists_are_refused(ns):
    """Both functions raise ValueError for an empty list."""
    for name in ("mean", "spread"):
        with pytest.raises(ValueError):
            ns[name]([])


def test_spread_of_a_random_list(ns, reference):
    """spread() of a random list matches the reference."""
    values = [random.Random(i).randint(-50, 50) for i in range(20)]
    assert ns["spread"](values) == reference["spread"](values)
