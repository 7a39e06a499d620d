"""The golden scorecards (tests/golden/) are what grading gives today: each case graded afresh in the
local sandbox matches its stored card, bar timings, dates and versions. When one differs on purpose,
`python -m tests.golden` writes them again."""

from __future__ import annotations

import pytest

from tests.golden import CASES, comparable, grade_all, load


@pytest.mark.slow
def test_the_golden_scorecards_are_what_grading_gives_today(tmp_path):
    fresh = grade_all(tmp_path)
    stale = [name for name in CASES if comparable(fresh[name]) != comparable(load(name))]
    assert not stale, f"golden scorecards that grading no longer gives (run `python -m tests.golden`): {stale}"
