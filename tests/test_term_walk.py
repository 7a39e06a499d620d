"""A term as an instructor ran it with an LMS, in-process (Starlette's TestClient on a SQLite store): an
extension for dates set on the dashboard, in the zone the course shows; an exercise hidden from students
until it opens; every button that changes something redirects after its POST; one gradebook across
exercises with each student's LMS id and email; a change history that names people."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from starlette.testclient import TestClient

from grader.core.exercise import load_exercise
from grader.course.store import Store
from grader.service import accounts
from grader.web.app import Service, create_app
from tests.helpers import EXERCISE
from tests.service import csrf_of, press_sign_in

ZONE = timezone(timedelta(hours=1))  # the course's zone, as the dashboard shows its dates
PAGE = f"/exercises/{EXERCISE}"


class Queue:
    def __init__(self) -> None:
        self.queued: list[int] = []

    def enqueue(self, submission_id: int) -> None:
        self.queued.append(submission_id)

    def health(self) -> list[str]:
        return []


@pytest.fixture
def term(tmp_path):
    """An exercise whose exercise.toml sets no date; a clock the test moves; ada and bob on the roster."""
    exercise = load_exercise(EXERCISE)
    undated = dataclasses.replace(exercise, web=dataclasses.replace(exercise.web, due=None, closes=None,
                                                                    submission_interval_s=0))
    store = Store(tmp_path / "grader.db")
    now = [datetime(2026, 12, 1, 9, 0, tzinfo=ZONE)]
    queue = Queue()
    service = Service(store=store, dispatcher=queue, exercises={EXERCISE: undated}, base_url="http://testserver",
                      clock=lambda: now[0])
    app = create_app(service)
    for student in ("ada", "bob"):
        accounts.add_student(store, student, tier="premium")

    def sign_in(role: str, student: str | None = None) -> tuple[TestClient, str]:
        client = TestClient(app)
        press_sign_in(client, f"/signin/{accounts.new_link(store, role, student)}")
        page = client.get("/")
        if student is not None and undated.prediction is not None:
            accounts.record_prediction(store, student, EXERCISE, undated.prediction.choices[0], False)
        return client, csrf_of(page)

    yield SimpleNamespace(exercise=undated, store=store, now=now, sign_in=sign_in, queue=queue, service=service)
    store.close()


def set_terms(client: TestClient, csrf: str, **fields: str):
    form = {"csrf": csrf, "opens": "", "due": "", "closes": "", "zone": "60", "per_day": "0", "cap": "",
            "release": "at_once", **fields}
    saved = client.post(f"/instructor/exercises/{EXERCISE}", data=form, follow_redirects=False)
    assert saved.status_code == 303, saved.text[:500]


@pytest.mark.unit
def test_an_extension_is_given_for_dates_set_on_the_dashboard_in_the_zone_the_course_shows(term):
    """The student's page had no "Due dates" when the dates were set on the dashboard, and an extension typed
    2026-12-08T23:59 was read in UTC, not the course's UTC+01:00: the student saw a deadline an hour off."""
    instructor, csrf = term.sign_in("instructor")
    set_terms(instructor, csrf, due="2026-12-07T23:59", closes="2026-12-08T12:00")
    page = instructor.get("/instructor/students/ada").text
    assert 'id="extensions"' in page, "no Due dates section for dates set on the dashboard"
    assert "due 2026-12-07 23:59 UTC+01:00" in page and "new date (UTC+01:00)" in page
    assert 'name="due" value="2026-12-07T23:59"' in page
    given = instructor.post("/instructor/students/ada/extension",
                            data={"csrf": csrf, "exercise": EXERCISE, "due": "2026-12-08T23:59"}, follow_redirects=False)
    assert given.status_code == 303
    assert term.store.extensions()[("ada", EXERCISE)] == datetime(2026, 12, 8, 23, 59, tzinfo=ZONE)
    # The student reads the date as it was typed, and may submit until it though the exercise closed.
    ada, ada_csrf = term.sign_in("student", "ada")
    assert "2026-12-08 23:59 UTC+01:00" in ada.get(PAGE).text
    term.now[0] = datetime(2026, 12, 8, 23, 30, tzinfo=ZONE)
    sent = ada.post(f"{PAGE}/submit", data={"csrf": ada_csrf, "code": "def f():\n    return 1\n"},
                    follow_redirects=False)
    assert sent.status_code == 303, sent.text[:500]
    bob, bob_csrf = term.sign_in("student", "bob")
    assert bob.post(f"{PAGE}/submit", data={"csrf": bob_csrf, "code": "x = 1\n"}).status_code == 403
    # The instructor's page shows the extension in the course's zone too.
    page = instructor.get("/instructor/students/ada").text
    assert "due 2026-12-08 23:59 UTC+01:00" in page and "(an extension)" in page


@pytest.mark.unit
def test_an_exercise_is_hidden_from_students_until_it_opens(term):
    instructor, csrf = term.sign_in("instructor")
    set_terms(instructor, csrf, opens="2026-12-02T08:00", due="2026-12-09T23:59")
    ada, ada_csrf = term.sign_in("student", "ada")
    assert f'href="{PAGE}"' not in ada.get("/").text, "a student's list shows an exercise before it opens"
    for response in (ada.get(PAGE), ada.get(f"{PAGE}/solution"),
                     ada.post(f"{PAGE}/submit", data={"csrf": ada_csrf, "code": "x = 1\n"}),
                     ada.post(f"{PAGE}/prediction", data={"csrf": ada_csrf, "choice": "0"})):
        assert response.status_code == 404 and "opens 2026-12-02 08:00 UTC+01:00" in response.text, response.text[:300]
    assert term.store.submissions() == [] and term.queue.queued == []
    # The instructor sees it, and the dashboard says it is hidden until then.
    assert instructor.get(PAGE).status_code == 200
    assert "hidden from students until 2026-12-02 08:00 UTC+01:00" in instructor.get("/instructor").text
    assert "visible from" in instructor.get(f"/instructor/exercises/{EXERCISE}").text
    term.now[0] = datetime(2026, 12, 2, 8, 0, tzinfo=ZONE)
    assert f'href="{PAGE}"' in ada.get("/").text and ada.get(PAGE).status_code == 200
    sent = ada.post(f"{PAGE}/submit", data={"csrf": ada_csrf, "code": "x = 1\n"}, follow_redirects=False)
    assert sent.status_code == 303 and len(term.store.submissions()) == 1


@pytest.mark.unit
def test_an_opening_date_after_the_due_date_is_refused(term):
    instructor, csrf = term.sign_in("instructor")
    form = {"csrf": csrf, "opens": "2026-12-10T08:00", "due": "2026-12-09T23:59", "closes": "", "zone": "60",
            "per_day": "0", "cap": "", "release": "at_once"}
    refused = instructor.post(f"/instructor/exercises/{EXERCISE}", data=form)
    assert refused.status_code == 400 and "cannot open" in refused.text
    assert term.store.exercise_terms() == {}


@pytest.mark.unit
def test_exercise_toml_may_set_when_the_exercise_opens_but_not_after_it_is_due():
    import tomllib

    from grader.core.page_settings import SettingError, web

    settings = web(tomllib.loads("opens = 2026-12-07T08:00:00+01:00\ndue = 2026-12-20T23:59:00+01:00\n"))
    assert settings.opens == datetime(2026, 12, 7, 8, 0, tzinfo=ZONE)
    with pytest.raises(SettingError, match="must not come after due"):
        web(tomllib.loads("opens = 2026-12-21T08:00:00+01:00\ndue = 2026-12-20T23:59:00+01:00\n"))
    with pytest.raises(SettingError, match="has no time zone"):
        web({"opens": "2026-12-07T08:00"})
