"""The published site's figures say what they count."""

from __future__ import annotations

import re

import pytest

from grader.core.scorecard import Scorecard
from grader.core.scorecard import TestResult as Result
from grader.course.publish import publish
from grader.course.store import Store
from tests.helpers import EXERCISE

pytestmark = pytest.mark.unit


def test_the_pass_rates_say_that_rejected_files_ran_no_test(tmp_path):
    with Store(tmp_path / "class.db") as store:
        for student, status in (("ann", "graded"), ("ben", "graded"), ("cy", "rejected"), ("dee", "rejected")):
            sid, _ = store.add_submission(student, EXERCISE, "free", student, "scheduler.py", b"x = 1\n")
            tests = [Result(id="t::test_a", name="test_a", suite="visible", status="passed", score=1, max_score=1)] \
                if status == "graded" else []
            store.save_scorecard(sid, Scorecard(exercise=EXERCISE, tier="free", submission_sha256=student,
                                                status=status, score=len(tests), max_score=1, tests=tests,
                                                reason="syntax error at line 1" if status == "rejected" else ""))
        publish(store, tmp_path / "site")
    index = " ".join((tmp_path / "site" / "index.html").read_text().split())
    assert "2/2" in index  # test_a: passed by the two whose files ran it, in a class of four
    note = re.search(rf'id="rates-count-{EXERCISE}">([^<]*)<', index)
    assert note and "over the students whose file ran that test" in note.group(1)
    assert "2 rejected files ran no test" in note.group(1)


def test_a_free_tier_full_score_is_a_share_of_the_whole_exercise_not_full_marks():
    """A free 10/10 ran 10 of the exercise's 76 points: the class view counts it as 13%, and the 'best'
    policy prefers a premium 70/76 to it."""
    from grader.core.scorecard import LockedTest, Scorecard
    from grader.course.gradebook import pick
    from grader.course.publish import exercise_view
    from grader.course.store import StoredSubmission

    def card(tier: str, score: int, top: int, locked: int) -> Scorecard:
        return Scorecard(exercise="x", tier=tier, submission_sha256="0" * 64, status="graded", score=score,
                         max_score=top, locked=[LockedTest("test_hidden", "hidden", locked)] if locked else [])

    free = StoredSubmission(1, "ada", "x", "free", "a" * 64, "x.py", "2026-12-01T00:00:00+00:00", card("free", 10, 10, 66))
    premium = StoredSubmission(2, "bob", "x", "premium", "b" * 64, "x.py", "2026-12-01T00:00:01+00:00",
                               card("premium", 76, 76, 0))
    view = exercise_view("x", [("ada", free), ("bob", premium)], {"ada": 1, "bob": 1}, "best")
    assert view["full_marks"] == 1
    assert view["mean"] == round((100 * 10 / 76 + 100) / 2, 1)
    later = StoredSubmission(3, "ada", "x", "premium", "c" * 64, "x.py", "2026-12-01T00:00:02+00:00",
                             card("premium", 70, 76, 0))
    assert pick([free, later], "best")[("ada", "x")].id == 3  # 70 of 76 beats 10 of 76
