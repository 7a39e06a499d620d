"""The published site's figures say what they count."""

from __future__ import annotations

import re

from grader.publish import publish
from grader.scorecard import Scorecard
from grader.scorecard import TestResult as Result
from grader.store import Store
from tests.helpers import EXERCISE


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
