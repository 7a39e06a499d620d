"""A random workload against the reference, drawn from the run's seed: a long list of a few values,
then short lists of up to 12."""

import random


def test_random_lists_match_the_reference(ns, reference, seed):
    """dedupe() of random lists gives what the reference gives."""
    rng = random.Random(seed)
    lists = [[rng.randint(0, 3) for _ in range(20)]]
    lists += [[rng.randint(0, 6) for _ in range(rng.randint(0, 12))] for _ in range(3)]
    for values in lists:
        assert ns["dedupe"](values) == reference["dedupe"](values), f"dedupe({values})"
