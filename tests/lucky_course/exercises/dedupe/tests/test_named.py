"""Named scenarios: what dedupe() must do, one rule a test (repeats only side by side, short lists)."""


def test_an_empty_list_stays_empty(ns):
    """Nothing in, nothing out."""
    assert ns["dedupe"]([]) == []


def test_a_repeat_side_by_side_is_dropped(ns):
    """[1, 2, 2, 3] keeps one 2."""
    assert ns["dedupe"]([1, 2, 2, 3]) == [1, 2, 3]


def test_the_order_of_first_appearance_is_kept(ns):
    """[3, 1, 2] stays as it is."""
    assert ns["dedupe"]([3, 1, 2]) == [3, 1, 2]
