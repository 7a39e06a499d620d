"""What a gradebook counts: the standing a policy picks, never a rejected file over a graded one, and
every score stated against the whole exercise's points with the tier's own beside it."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from grader.core.scorecard import LockedTest, Scorecard
from grader.course.deadlines import Deadlines
from grader.course.gradebook import POLICIES, pick, rows
from grader.course.publish import build_site
from grader.course.store import Store
from tests.helpers import EXERCISE

pytestmark = pytest.mark.unit

DUE = datetime(2026, 12, 20, 23, 59, tzinfo=timezone.utc)


def card(status: str, score: int, tier: str = "premium", sha: str = "0" * 64) -> Scorecard:
    """A card of the project's exercise: premium runs all 76 points, free runs 10 and has 66 locked."""
    locked = [LockedTest("test_hidden", "hidden", 66)] if tier == "free" else []
    return Scorecard(exercise=EXERCISE, tier=tier, submission_sha256=sha, status=status, score=score,
                     max_score=10 if tier == "free" else 76, locked=locked,
                     reason="syntax error at line 1: invalid syntax" if status == "rejected" else "")


def hand_in(store: Store, student: str, moment: datetime, scorecard: Scorecard) -> int:
    sid, _ = store.add_submission(student, EXERCISE, scorecard.tier, f"{student}{moment.isoformat()}",
                                  "scheduler.py", f"# {student} {moment}\n".encode(),
                                  submitted_at=moment.isoformat(timespec="seconds"))
    store.save_scorecard(sid, scorecard)
    return sid


def gradebook(files: dict[str, str]) -> dict[str, dict[str, str]]:
    return {r["student"]: r for r in csv.DictReader(io.StringIO(files[f"gradebook-{EXERCISE}.csv"]))}


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "class.db") as opened:
        yield opened


def test_a_rejected_file_never_replaces_a_graded_standing_under_any_policy(store):
    """ada's 76/76, then a file with a syntax error: her standing stays 76/76 under every policy, in
    the CSV, the JSON and the overview. cy handed in only a rejected file: her row says so, with 0."""
    graded = hand_in(store, "ada", DUE - timedelta(hours=3), card("graded", 76))
    hand_in(store, "ada", DUE - timedelta(hours=1), card("rejected", 0))
    hand_in(store, "bob", DUE - timedelta(hours=2), card("graded", 40))
    hand_in(store, "cy", DUE - timedelta(hours=2), card("rejected", 0))
    deadlines = Deadlines(due={EXERCISE: DUE})
    for policy in POLICIES:
        assert pick(store.submissions(EXERCISE), policy, deadlines.is_late)[("ada", EXERCISE)].id == graded, policy
        files = build_site(store, policy, deadlines=deadlines)
        book = gradebook(files)
        assert (book["ada"]["score"], book["ada"]["status"], book["ada"]["reason"]) == ("76", "graded", ""), policy
        assert (book["cy"]["score"], book["cy"]["status"]) == ("0", "rejected") and "syntax" in book["cy"]["reason"]
        data = {r["student"]: r for r in json.loads(files[f"gradebook-{EXERCISE}.json"])["rows"]}
        assert data["ada"]["score"] == 76 and data["ada"]["status"] == "graded", policy
        index = " ".join(files["index.html"].split())
        assert "1 rejected file ran no test" in index, policy  # cy's, not ada's
        assert "<b>1</b><span>full marks</span>" in index, policy  # ada's 76/76
        assert "<b>50.9%</b><span>mean score</span>" in index, policy  # ada 100%, bob 40/76, cy 0


def test_a_rejected_file_on_time_leaves_the_late_graded_one_counted(store):
    """On time, only a rejected file; after the due date, a graded one: the on-time policy counts the
    graded one, marked late, since the rejected one counts nowhere."""
    hand_in(store, "ada", DUE - timedelta(hours=1), card("rejected", 0))
    late = hand_in(store, "ada", DUE + timedelta(hours=1), card("graded", 70))
    deadlines = Deadlines(due={EXERCISE: DUE})
    assert pick(store.submissions(EXERCISE), "on-time", deadlines.is_late)[("ada", EXERCISE)].id == late
    row = gradebook(build_site(store, "on-time", deadlines=deadlines))["ada"]
    assert (row["score"], row["status"], row["late"]) == ("70", "graded", "True")


def test_the_best_of_a_graded_zero_and_a_rejected_file_is_the_graded_zero(store):
    stub = hand_in(store, "ada", DUE - timedelta(hours=2), card("graded", 0))
    hand_in(store, "ada", DUE - timedelta(hours=1), card("rejected", 0))
    assert pick(store.submissions(EXERCISE), "best")[("ada", EXERCISE)].id == stub


def test_a_free_full_score_is_stated_against_the_whole_exercise_with_the_tiers_points_beside(store):
    """A free 10/10 ran 10 of the exercise's 76 points: its row reads 10 of 76, with the tier and the
    tier's own 10 beside it, so no spreadsheet takes it for full marks."""
    hand_in(store, "ada", DUE, card("graded", 10, tier="free"))
    hand_in(store, "bob", DUE, card("graded", 76))
    header, table = rows([("ada", store.submissions(EXERCISE, "ada")[0].card),
                          ("bob", store.submissions(EXERCISE, "bob")[0].card)])
    assert header[:5] == ["student", "name", "tier", "score", "max_score"] and "tier_max_score" in header
    by_student = {r["student"]: r for r in table}
    assert (by_student["ada"]["tier"], by_student["ada"]["score"], by_student["ada"]["max_score"],
            by_student["ada"]["tier_max_score"]) == ("free", 10, 76, 10)
    assert (by_student["bob"]["score"], by_student["bob"]["max_score"], by_student["bob"]["tier_max_score"]) == \
        (76, 76, 76)
    files = build_site(store)
    assert gradebook(files)["ada"]["max_score"] == "76"
    index = " ".join(files["index.html"].split())
    assert re.search(r'<a href="students/ada.html">ada</a></td> <td class="num">1</td> <td class="num">10/76 '
                     r'<span class="muted">free</span></td>', index), index
