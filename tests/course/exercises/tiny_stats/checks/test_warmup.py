"""Warm-up: the submission against the reference on a few lists."""

import pytest


@pytest.mark.parametrize("values", [[1, 2, 3, 4], [5], [-2.5, 2.5, 10]])
def test_mean_matches_the_reference(ns, reference, values):
    """mean() gives what the reference gives."""
    want, got = reference["mean"](values), ns["mean"](values)
    assert type(got) in (int, float), f"mean({values}) should be a number, got a {type(got).__name__}"
    assert got == pytest.approx(want), f"mean({values}) should be {want}, got {got}"


def test_spread_of_three_values(ns):
    """spread() is the largest value minus the smallest."""
    got = ns["spread"]([4, 1, 9])
    assert got == 8
