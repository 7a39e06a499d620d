"""The service in-process (Starlette's TestClient on a SQLite store), in the fast loop: the dashboard flags
scorecards of another grader; a store outage is the service's own 503 page."""

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


def test_a_store_outage_is_the_services_own_503_page_on_every_route(tmp_path):
    """A PostgreSQL restart or a lost connection: sign-in and every other page say the service is back in a
    moment (503, Retry-After), never a bare 500."""
    from sqlalchemy import create_engine

    exercise = load_exercise(EXERCISE)
    store = Store(tmp_path / "grader.db")
    service = Service(store=store, dispatcher=Recorded(), exercises={exercise.slug: exercise},
                      base_url="http://testserver")
    client = TestClient(create_app(service), raise_server_exceptions=False)
    signed_in = client.post(f"/signin/{accounts.new_link(store, 'instructor')}", follow_redirects=False)
    client.cookies.set(COOKIE, signed_in.cookies[COOKIE])
    accounts.add_student(store, "ada")
    token = accounts.new_link(store, "student", "ada")
    store.engine.dispose()
    store.engine = create_engine(f"sqlite:///{tmp_path}/gone/grader.db")  # the driver cannot open it: an outage
    for method, path in (("GET", "/"), ("GET", f"/signin/{token}"), ("POST", f"/signin/{token}"),
                         ("GET", "/instructor"), ("GET", f"/exercises/{exercise.slug}"), ("GET", "/history")):
        response = client.request(method, path, follow_redirects=False)
        assert response.status_code == 503, (path, response.status_code, response.text[:300])
        assert "Back in a moment" in response.text and "grading resumes by itself" in response.text
        assert response.headers["retry-after"] == "30" and "<html" in response.text.lower()
    store.close()
