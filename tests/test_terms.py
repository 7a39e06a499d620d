"""An exercise's terms (grader.course.terms): the late policy's arithmetic, exercise.toml's values as the dashboard
changes them (kept with who changed them), and when the hidden suites' results are released."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from grader.core.exercise import load_exercise
from grader.core.page_settings import SettingError, web
from grader.course.store import Store
from grader.course.terms import DAY_S, LatePolicy, Terms, TermsError, checked_changes, terms_of
from tests.helpers import EXERCISE

pytestmark = pytest.mark.unit

DUE = datetime(2026, 12, 20, 23, 59, tzinfo=timezone.utc)

@pytest.mark.parametrize("policy, late_by_s, score, lost", [
    (LatePolicy(), 3 * DAY_S, 40, 0.0),                       # no policy: late work keeps its score
    (LatePolicy(per_day=10), 0, 40, 0.0),                     # on time
    (LatePolicy(per_day=10), 1, 40, 7.6),                     # a second late is a day started: 10% of 76
    (LatePolicy(per_day=10), DAY_S, 40, 7.6),
    (LatePolicy(per_day=10), DAY_S + 1, 40, 15.2),            # the second day started
    (LatePolicy(per_day=10), 30 * DAY_S, 40, 40.0),           # never more than it scored
    (LatePolicy(cap=50), 60, 76, 38.0),                       # full marks capped at half
    (LatePolicy(cap=50), 60, 20, 0.0),                        # under the cap: nothing taken
    (LatePolicy(per_day=5, cap=50), 60, 76, 38.0),            # the larger deduction holds
    (LatePolicy(per_day=60, cap=50), 60, 76, 45.6),
])
def test_a_late_policy_takes_off_per_day_started_or_down_to_its_cap(policy, late_by_s, score, lost):
    assert policy.deduction(score, 76, late_by_s) == lost

def test_the_policy_is_said_in_a_sentence_a_student_reads_before_handing_in_late():
    assert LatePolicy().describe() == "Late work is marked late and keeps its score."
    assert "10% of the points is taken off for each day" in LatePolicy(per_day=10).describe()
    both = LatePolicy(per_day=10, cap=50).describe()
    assert "at most 50%" in both and "whichever takes off more" in both

def test_exercise_toml_gives_the_first_terms_and_refuses_what_cannot_hold():
    settings = web({"late_penalty_per_day": 10, "late_cap": 60.5, "release": "on_release"})
    assert (settings.late_penalty_per_day, settings.late_cap, settings.release) == (10.0, 60.5, "on_release")
    for table, said in (({"late_penalty_per_day": 120}, "late_penalty_per_day must be a percent"),
                        ({"late_penalty_per_day": True}, "late_penalty_per_day must be a percent"),
                        ({"late_cap": -1}, "late_cap must be the percent"),
                        ({"release": "later"}, "release must be one of at_once, after_due, on_release")):
        with pytest.raises(SettingError, match=said):
            web(table)

def test_changes_in_the_dashboard_override_exercise_toml_and_keep_who_made_them(tmp_path):
    exercise = load_exercise(EXERCISE)
    exercise = dataclasses.replace(exercise, web=dataclasses.replace(exercise.web, due=DUE, late_penalty_per_day=10))
    with Store(tmp_path / "g.db") as store:
        first = terms_of(exercise, store.exercise_terms().get(EXERCISE))
        assert first.due == DUE and first.late == LatePolicy(per_day=10) and not first.changed
        later = DUE + timedelta(days=2)
        changes = checked_changes(first, later, None, 10, 50, "at_once")
        assert changes == {"due": later.isoformat(), "late_cap": 50.0}  # only what the form changed
        store.set_exercise_terms(EXERCISE, changes, "instructor (sign-in link 1)")
        now = terms_of(exercise, store.exercise_terms().get(EXERCISE))
        assert now.due == later and now.late == LatePolicy(per_day=10, cap=50)
        assert now.changed["due"].by == "instructor (sign-in link 1)" and "late_penalty_per_day" not in now.changed
        # No due date at all: stored as "" (None would go back to exercise.toml's).
        store.set_exercise_terms(EXERCISE, checked_changes(now, None, None, 10, 50, "at_once"), "someone else")
        assert terms_of(exercise, store.exercise_terms().get(EXERCISE)).due is None
        store.set_exercise_terms(EXERCISE, {"due": None}, "someone else")
        assert terms_of(exercise, store.exercise_terms().get(EXERCISE)).due == DUE

def test_a_form_that_cannot_hold_is_refused_with_why():
    terms = Terms()
    with pytest.raises(TermsError, match="cannot close .* before it is due"):
        checked_changes(terms, DUE, DUE - timedelta(hours=1), 0, None, "at_once")
    with pytest.raises(TermsError, match="penalty per day is a percent"):
        checked_changes(terms, None, None, 101, None, "at_once")
    with pytest.raises(TermsError, match="released"):
        checked_changes(terms, None, None, 0, None, "tomorrow")

def test_results_are_released_at_once_after_the_due_date_or_when_an_instructor_says():
    assert Terms().released(DUE)
    assert not Terms(due=DUE, release="after_due").released(DUE) and Terms(due=DUE, release="after_due").released(
        DUE + timedelta(seconds=1))
    assert not Terms(release="on_release").released(DUE)
    assert Terms(release="on_release", released_at=DUE).released(DUE)
