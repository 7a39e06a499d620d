"""Due dates ([web] due and closes, and a student's extension): late submissions are marked, the
on-time policy counts the latest before the student's own due date, and an exercise closes."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from datetime import datetime, timedelta, timezone

import pytest
from starlette.testclient import TestClient

from grader.core.exercise import ExerciseError, load_exercise
from grader.core.grading import new_scorecard
from grader.core.page_settings import SettingError, web
from grader.course.deadlines import Deadlines
from grader.course.gradebook import pick
from grader.course.store import Store
from grader.service import accounts
from grader.web.app import Service, create_app
from tests.helpers import EXERCISE
from tests.service import csrf_of, press_sign_in

ZONE = timezone(timedelta(hours=1))
DUE = datetime(2026, 12, 20, 23, 59, tzinfo=ZONE)
CLOSES = DUE + timedelta(days=2)
PAGE = f"/exercises/{EXERCISE}"


@pytest.mark.unit
def test_a_due_date_needs_its_time_zone_and_closes_comes_after_it():
    import tomllib

    settings = web(tomllib.loads("due = 2026-12-20T23:59:00+01:00\ncloses = '2026-12-22T23:59:00Z'\n"))
    assert settings.due == DUE and settings.closes == datetime(2026, 12, 22, 23, 59, tzinfo=timezone.utc)
    for table, said in (({"due": "2026-12-20T23:59"}, "has no time zone"),
                        ({"due": "Friday"}, "must be a date and time with its zone"),
                        (tomllib.loads("due = 2026-12-20"), "must be a date and time with its zone"),
                        ({"due": "2026-12-20T23:59Z", "closes": "2026-12-19T00:00Z"}, "must not come before due")):
        with pytest.raises(SettingError, match=said):
            web(table)


@pytest.mark.unit
def test_an_exercise_with_a_due_date_without_a_zone_is_refused_at_load(tmp_path):
    import shutil

    project = tmp_path / "project"
    for folder in ("exercises", "solutions", "hidden_tests"):
        shutil.copytree(load_exercise(EXERCISE).root / folder / EXERCISE, project / folder / EXERCISE)
    toml = project / "exercises" / EXERCISE / "exercise.toml"
    toml.write_text(toml.read_text().replace("[web]\n", '[web]\ndue = "2026-12-20T23:59"\n'))
    with pytest.raises(ExerciseError, match=r"\[web\] due 2026-12-20T23:59:00 has no time zone"):
        load_exercise(str(project / "exercises" / EXERCISE))


@pytest.fixture
def course(tmp_path):
    exercise = load_exercise(EXERCISE)
    dated = dataclasses.replace(exercise, web=dataclasses.replace(exercise.web, due=DUE, closes=CLOSES,
                                                                  submission_interval_s=0))
    store = Store(tmp_path / "grader.db")
    store.migrate()
    now = [DUE - timedelta(days=1)]

    class Queue:
        def enqueue(self, submission_id: int) -> None:
            pass

        def health(self) -> list[str]:
            return []

    service = Service(store=store, dispatcher=Queue(), exercises={EXERCISE: dated},
                      base_url="http://testserver", clock=lambda: now[0])
    app = create_app(service)
    for student in ("ada", "bob"):
        accounts.add_student(store, student)

    def sign_in(role: str, student: str | None = None) -> tuple[TestClient, str]:
        client = TestClient(app)
        press_sign_in(client, f"/signin/{accounts.new_link(store, role, student)}")
        page = client.get("/")
        if student is not None:
            question = dated.prediction
            assert question is not None
            accounts.record_prediction(store, student, EXERCISE, question.choices[0], False)
        return client, csrf_of(page)

    yield dated, store, now, sign_in
    store.close()


def submit(client: TestClient, csrf: str, code: str):
    return client.post(f"{PAGE}/submit", data={"csrf": csrf, "code": code}, follow_redirects=False)


@pytest.mark.unit
def test_late_submissions_are_marked_and_a_closed_exercise_takes_none_but_under_an_extension(course):
    exercise, store, now, sign_in = course
    ada, csrf = sign_in("student", "ada")
    page = ada.get(PAGE).text
    assert "Due 2026-12-20 23:59 UTC+01:00 (in 1 day)" in page and "Closes 2026-12-22 23:59 UTC+01:00" in page
    assert submit(ada, csrf, "x = 1\n").status_code == 303  # on time
    now[0] = DUE + timedelta(hours=3)
    page = ada.get(PAGE).text
    assert "(3 hours ago)" in page and "A submission now is marked late" in page
    assert submit(ada, csrf, "x = 2\n").status_code == 303  # late, still taken
    history = ada.get("/history").text
    assert history.count('<span class="pill late">late</span>') == 1
    now[0] = CLOSES + timedelta(minutes=1)
    page = ada.get(PAGE).text
    assert "Closed since 2026-12-22 23:59 UTC+01:00" in page and 'id="code"' not in page
    refused = submit(ada, csrf, "x = 3\n")
    assert refused.status_code == 403 and "This exercise closed at 2026-12-22 23:59 UTC+01:00" in refused.text
    assert "x = 3" in refused.text, "the refused code left the editor"
    assert len(store.submissions(EXERCISE, "ada")) == 2

    instructor, instructor_csrf = sign_in("instructor")
    form = instructor.get("/instructor/students/ada").text
    assert re.search(r'name="due" value="2026-12-20T23:59"', form) and "new date (UTC+01:00)" in form
    given = instructor.post("/instructor/students/ada/extension",
                            data={"csrf": instructor_csrf, "exercise": EXERCISE, "due": "2026-12-24T12:00"},
                            follow_redirects=False)
    assert given.status_code == 303
    assert store.extensions() == {("ada", EXERCISE): datetime(2026, 12, 24, 12, 0, tzinfo=ZONE)}
    # With her own date, ada may submit past the closing, and her late one of before is on time now.
    page = ada.get(PAGE).text
    assert "Due 2026-12-24 12:00 UTC+01:00" in page and "your own date" in page and 'id="code"' in page
    assert submit(ada, csrf, "x = 3\n").status_code == 303
    assert '<span class="pill late">late</span>' not in ada.get("/history").text
    bob, bob_csrf = sign_in("student", "bob")
    assert submit(bob, bob_csrf, "y = 1\n").status_code == 403, "ada's extension opened the exercise to bob"
    assert instructor.post("/instructor/students/ada/extension",
                           data={"csrf": instructor_csrf, "exercise": EXERCISE, "due": "next week"}).status_code == 400
    instructor.post("/instructor/students/ada/extension", data={"csrf": instructor_csrf, "exercise": EXERCISE, "due": ""})
    assert store.extensions() == {}


@pytest.mark.unit
def test_the_on_time_policy_counts_the_latest_before_each_students_own_due_date(course):
    exercise, store, now, sign_in = course

    def handed_in(student: str, moment: datetime, score: int) -> None:
        sid, _ = store.add_submission(student, EXERCISE, "premium", f"{student}{score}".ljust(64, "0"),
                                      exercise.submission_file, f"x = {score}\n".encode(), state="graded",
                                      submitted_at=moment.astimezone(timezone.utc).isoformat(timespec="seconds"))
        store.save_scorecard(sid, dataclasses.replace(new_scorecard(exercise, "premium", "local"),
                                                      score=score, max_score=76, status="graded"))

    handed_in("ada", DUE - timedelta(hours=2), 40)
    handed_in("ada", DUE + timedelta(hours=1), 76)   # late
    handed_in("bob", DUE + timedelta(hours=5), 30)   # late, and bob's only one
    handed_in("cy", DUE - timedelta(days=1), 20)
    handed_in("cy", DUE + timedelta(days=1), 60)     # late, but within cy's extension
    store.set_extension("cy", EXERCISE, DUE + timedelta(days=2))
    deadlines = Deadlines.of([exercise], store)
    counted = pick(store.submissions(EXERCISE), "on-time", deadlines.is_late)
    assert {s: sub.card.score for (s, _), sub in counted.items()} == {"ada": 40, "bob": 30, "cy": 60}
    assert {s: sub.card.score for (s, _), sub in pick(store.submissions(EXERCISE), "latest").items()} == \
        {"ada": 76, "bob": 30, "cy": 60}
    instructor, _ = sign_in("instructor")
    on_time = instructor.get(f"/instructor/site/on-time/gradebook-{EXERCISE}.csv")
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(on_time.text))}
    assert {s: (r["score"], r["late"]) for s, r in rows.items()} == \
        {"ada": ("40", "False"), "bob": ("30", "True"), "cy": ("60", "False")}
    latest = {r["student"]: r for r in csv.DictReader(io.StringIO(
        instructor.get(f"/instructor/site/gradebook-{EXERCISE}.csv").text))}
    assert (latest["ada"]["score"], latest["ada"]["late"]) == ("76", "True")
    moved = instructor.get("/instructor/site/index.html?policy=on-time", follow_redirects=False)
    assert moved.headers["location"] == "/instructor/site/on-time/index.html"


@pytest.mark.unit
def test_publish_takes_the_on_time_policy_and_its_gradebook_says_who_was_late(tmp_path):
    from grader.cli import main

    exercise = load_exercise(EXERCISE)
    with Store(tmp_path / "class.db") as store:
        store.migrate()
        sid, _ = store.add_submission("ada", EXERCISE, "premium", "a" * 64, exercise.submission_file, b"x = 1\n",
                                      state="graded")
        store.save_scorecard(sid, new_scorecard(exercise, "premium", "local"))
    assert main(["publish", "--out", str(tmp_path / "site"), "--policy", "on-time", "--names", "--db",
                 str(tmp_path / "class.db")]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "site" / f"gradebook-{EXERCISE}.csv").read_text())))
    assert [(r["student"], r["late"]) for r in rows] == [("ada", "False")]  # the project's exercise has no due date
    assert "on-time" in (tmp_path / "site" / "index.html").read_text()


@pytest.mark.unit
def test_a_due_date_without_a_closing_shows_on_the_page_before_and_after_the_prediction(course):
    exercise, store, now, sign_in = course
    unclosed = dataclasses.replace(exercise, web=dataclasses.replace(exercise.web, closes=None))
    client = TestClient(create_app(Service(store=store, dispatcher=None, exercises={EXERCISE: unclosed},  # type: ignore[arg-type]
                                           base_url="http://testserver", clock=lambda: now[0])))
    press_sign_in(client, f"/signin/{accounts.new_link(store, 'student', 'bob')}")
    page = client.get(PAGE)  # bob has not answered the question yet
    assert page.status_code == 200 and "Due 2026-12-20 23:59 UTC+01:00 (in 1 day)." in page.text
    assert "Closes" not in page.text and "Closed" not in page.text


@pytest.mark.unit
@pytest.mark.parametrize("rule, said", [
    ("after_first_graded", "opens after a first graded submission, and you have none: it stays closed"),
    ("after_full_marks", "opens with full marks, and no submission of yours has them: it stays closed"),
    ("2026-12-01", None),
])
def test_a_closed_exercise_says_the_truth_of_its_solution(course, rule, said):
    """Past the closing no submission can be made: a solution that opens after one says it stays closed,
    rather than promising it after a submission the student cannot make. A date's rule still holds."""
    exercise, store, now, sign_in = course
    ruled = dataclasses.replace(exercise, web=dataclasses.replace(exercise.web, solution=rule))
    client = TestClient(create_app(Service(store=store, dispatcher=None, exercises={EXERCISE: ruled},  # type: ignore[arg-type]
                                           base_url="http://testserver", clock=lambda: now[0])))
    accounts.set_tier(store, "ada", "premium")
    press_sign_in(client, f"/signin/{accounts.new_link(store, 'student', 'ada')}")
    accounts.record_prediction(store, "ada", EXERCISE, exercise.prediction.choices[0], False)
    now[0] = CLOSES + timedelta(minutes=1)
    section = re.search(r'<section class="card" id="solution">(.*?)</section>', client.get(PAGE).text, re.S)
    assert section
    text = " ".join(section.group(1).split())
    if said is None:  # a date that has come: open, closed exercise or not
        assert "Open the reference solution" in text
        return
    assert "after your first graded submission" not in text and "once you get full marks" not in text
    assert "no more submissions" in text and said in text, text
    refused = client.get(f"{PAGE}/solution")
    assert refused.status_code == 403 and said in refused.text


@pytest.mark.unit
def test_a_late_submission_says_by_how_much_and_the_exercise_list_shows_due_and_closed(course):
    exercise, store, now, sign_in = course
    ada, csrf = sign_in("student", "ada")
    listed = re.search(rf'<section class="card"><h2><a href="{PAGE}">.*?</section>', ada.get("/").text, re.S)
    assert listed and "due 2026-12-20 23:59 UTC+01:00 (in 1 day)" in listed.group(0)
    assert "closed" not in listed.group(0).lower()
    on_time = submit(ada, csrf, "x = 1\n").headers["location"]
    assert 'id="late"' not in ada.get(on_time).text
    now[0] = DUE + timedelta(hours=3, minutes=5)
    late = submit(ada, csrf, "x = 2\n").headers["location"]
    note = re.search(r'<p class="bad" id="late">([^<]*)</p>', ada.get(late).text)
    assert note and note.group(1) == "Late: handed in 3 hours 5 minutes after the due date, 2026-12-20 23:59 UTC+01:00."
    instructor, _ = sign_in("instructor")
    assert 'id="late"' in instructor.get(late).text  # the instructor reads it too
    now[0] = CLOSES + timedelta(minutes=1)
    listed = re.search(rf'<section class="card"><h2><a href="{PAGE}">.*?</section>', ada.get("/").text, re.S)
    assert listed and '<span class="pill late">closed</span>' in listed.group(0)
    store.set_extension("ada", EXERCISE, CLOSES + timedelta(days=1))  # her own date: open to her, and not late
    listed = re.search(rf'<section class="card"><h2><a href="{PAGE}">.*?</section>', ada.get("/").text, re.S)
    assert listed and "closed" not in listed.group(0) and "your own date" in listed.group(0)
    assert 'id="late"' not in ada.get(late).text


@pytest.mark.unit
def test_the_dashboard_changes_dates_and_late_policy_keeps_who_did_and_asks_for_no_regrade(course):
    from grader.core.fingerprint import exercise_fingerprint

    exercise, store, now, sign_in = course
    instructor, csrf = sign_in("instructor")
    assert "due 2026-12-20 23:59 UTC+01:00" in instructor.get("/instructor").text
    form = instructor.get(f"/instructor/exercises/{EXERCISE}").text
    assert 'name="due" value="2026-12-20T23:59"' in form and '<option value="60" selected>UTC+01:00</option>' in form
    fields = {"csrf": csrf, "due": "2026-12-27T23:59", "closes": "2026-12-29T23:59", "zone": "60", "per_day": "10",
              "cap": "", "release": "at_once"}
    saved = instructor.post(f"/instructor/exercises/{EXERCISE}", data=fields, follow_redirects=False)
    assert saved.status_code == 303 and "no regrade is needed" in instructor.get(saved.headers["location"]).text
    changes = store.exercise_terms()[EXERCISE]
    assert set(changes) == {"due", "closes", "late_penalty_per_day"}  # only what changed
    assert changes["due"].by.startswith("instructor (sign-in link ") and changes["late_penalty_per_day"].value == 10
    page = instructor.get(f"/instructor/exercises/{EXERCISE}").text
    assert "penalty per day late (%)" in page and "2026-12-27 23:59 UTC+01:00" in page  # the history
    dashboard = instructor.get("/instructor").text
    assert "due 2026-12-27 23:59 UTC+01:00" in dashboard and "10% of the points" in dashboard
    assert f'id="stale-{EXERCISE}"' not in dashboard
    assert exercise_fingerprint(exercise) == exercise_fingerprint(load_exercise(EXERCISE))

    ada, ada_csrf = sign_in("student", "ada")
    now[0] = datetime(2026, 12, 28, 1, 0, tzinfo=ZONE)  # a day and an hour after the new due date
    page = ada.get(PAGE).text
    assert "Due 2026-12-27 23:59 UTC+01:00" in page and 'id="late-warning"' in page
    assert "Late policy: 10% of the points is taken off for each day (or part of a day) late." in page

    # A form that cannot hold changes nothing and says why; one without its token is refused.
    wrong = instructor.post(f"/instructor/exercises/{EXERCISE}", data={**fields, "closes": "2026-12-26T00:00"})
    assert wrong.status_code == 400 and "cannot close" in wrong.text
    assert instructor.post(f"/instructor/exercises/{EXERCISE}", data={**fields, "csrf": "x"}).status_code == 403
    assert ada.post(f"/instructor/exercises/{EXERCISE}", data={**fields, "csrf": ada_csrf}).status_code == 403
    assert set(store.exercise_terms()[EXERCISE]) == {"due", "closes", "late_penalty_per_day"}


@pytest.mark.unit
def test_gradebooks_take_off_the_late_penalty_and_add_an_adjustment_beside_the_raw_score(course):
    exercise, store, now, sign_in = course
    store.set_exercise_terms(EXERCISE, {"late_penalty_per_day": 10}, "test")
    moment = DUE + timedelta(hours=30)  # two days started
    sid, _ = store.add_submission("ada", EXERCISE, "premium", "a" * 64, exercise.submission_file, b"x = 1\n",
                                  state="graded", submitted_at=moment.astimezone(timezone.utc).isoformat())
    card = dataclasses.replace(new_scorecard(exercise, "premium", "local"), score=60, max_score=76, status="graded")
    store.save_scorecard(sid, card)
    instructor, csrf = sign_in("instructor")
    row = next(csv.DictReader(io.StringIO(instructor.get(f"/instructor/site/gradebook-{EXERCISE}.csv").text)))
    assert (row["score"], row["raw_score"], row["late_deduction"], row["adjustment"], row["late"]) == \
        ("44.8", "60", "15.2", "0", "True")
    # A bonus for the student: needs a comment, which the student then reads beside the grade.
    assert instructor.post(f"/submissions/{sid}/adjust", data={"csrf": csrf, "points": "3"}).status_code == 400
    done = instructor.post(f"/submissions/{sid}/adjust", data={"csrf": csrf, "points": "3.5",
                                                               "comment": "the tie-break was in the brief's errata"},
                           follow_redirects=False)
    assert done.status_code == 303
    row = next(csv.DictReader(io.StringIO(instructor.get(f"/instructor/site/gradebook-{EXERCISE}.csv").text)))
    assert (row["score"], row["raw_score"], row["adjustment"], row["adjustment_comment"]) == \
        ("48.3", "60", "3.5", "the tie-break was in the brief's errata")
    ada, ada_csrf = sign_in("student", "ada")
    page = ada.get(f"/submissions/{sid}").text
    assert "Grade: 48.3/76" in page and "60 from the tests − 15.2 for lateness + 3.5 by your instructor" in page
    assert "the tie-break was in the brief&#39;s errata" in page and 'id="adjust"' not in page
    accounts.add_student(store, "ada", "Ada Lovelace")
    assert '>ada</a> (Ada Lovelace)' in instructor.get(f"/submissions/{sid}").text
    assert ada.post(f"/submissions/{sid}/adjust", data={"csrf": ada_csrf, "points": "50",
                                                        "comment": "me"}).status_code == 403
    instructor.post(f"/submissions/{sid}/adjust", data={"csrf": csrf, "points": "0", "comment": ""})
    assert store.adjustments() == {} and "by your instructor" not in ada.get(f"/submissions/{sid}").text
