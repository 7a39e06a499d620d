"""The instructor's dashboard says when scorecards were given by another grader or another version of an
exercise's suites: their fingerprint is not the exercise's now, and a regrade brings them up to date.
In-process (Starlette's TestClient on a SQLite store), so it runs in the fast loop."""

from __future__ import annotations

import dataclasses
import re

import pytest
from starlette.testclient import TestClient

from grader.exercise import load_exercise
from grader.grading import new_scorecard
from grader.service import accounts
from grader.store import Store
from grader.web.app import COOKIE, Service, create_app
from tests.helpers import EXERCISE


class Recorded:
    def __init__(self) -> None:
        self.queued: list[int] = []

    def enqueue(self, submission_id: int) -> None:
        self.queued.append(submission_id)


@pytest.fixture
def dashboard(tmp_path):
    exercise = load_exercise(EXERCISE)
    store = Store(tmp_path / "grader.db")
    store.migrate()
    service = Service(store=store, dispatcher=Recorded(), exercises={exercise.slug: exercise},
                      base_url="http://testserver")
    client = TestClient(create_app(service))
    token = accounts.new_link(store, "instructor")
    response = client.post(f"/signin/{token}", follow_redirects=False)
    assert response.status_code == 303 and COOKIE in response.cookies
    client.cookies.set(COOKIE, response.cookies[COOKIE])

    def grade(student: str, fingerprint: str | None) -> None:
        submission_id, _ = store.add_submission(student, exercise.slug, "free", student * 8, exercise.submission_file,
                                                b"pass\n", state="graded")
        card = new_scorecard(exercise, "free", "local")
        if fingerprint is not None:
            card = dataclasses.replace(card, exercise_fingerprint=fingerprint)
        store.save_scorecard(submission_id, card)

    def page() -> str:
        response = client.get("/instructor")
        assert response.status_code == 200
        return response.text

    yield exercise, grade, page
    store.close()


def test_scorecards_of_another_grader_are_flagged_for_a_regrade(dashboard):
    exercise, grade, page = dashboard
    grade("ada", None)
    assert f'id="stale-{exercise.slug}"' not in page(), "a scorecard of this very grader was flagged"
    grade("bob", "0123456789abcdef")
    grade("cy", "fedcba9876543210")
    flag = re.search(rf'id="stale-{exercise.slug}">([^<]*)<', page())
    assert flag, "scorecards of another grader went unflagged"
    assert flag.group(1).startswith("2 scorecard(s)") and "regrade" in flag.group(1)
