"""When students see their results (`[web] release`): before release every student page and the report
show the open suites' results and only how many more tests ran; the dashboard releases and withholds them;
the class site downloads as a zip, pseudonymous unless asked for names."""

from __future__ import annotations

import dataclasses
import io
import re
import zipfile
from datetime import timedelta

import pytest

from grader.core.grading import expected_max, new_scorecard
from grader.core.scorecard import Diagnosis, Scorecard
from grader.core.scorecard import TestResult as Result
from grader.service import accounts
from tests.helpers import EXERCISE
from tests.test_due_dates import DUE
from tests.test_web_in_process import PAGE, site  # noqa: F401 (the fixture)

pytestmark = pytest.mark.unit

SECRET = "the hidden check saw 7 where 8 was due"  # every failed hidden test's message
HINT = Diagnosis("13_first_token_late", "emits a request's first token a step late", 0.9)


def premium_card(exercise, hidden_passed: bool = False) -> Scorecard:
    """A premium card as grading would store it: every visible test passed; the hidden ones all passed, or
    all but the first failed (with SECRET), and a diagnosis drawn from the failures."""
    expected = expected_max(exercise, "premium")
    tests = []
    for index, ((suite, name), points) in enumerate(expected.items()):
        passed = suite == "visible" or hidden_passed or index == len(expected) - 1
        tests.append(Result(f"{suite}::{name}", name, suite, "passed" if passed else "failed",
                                points if passed else 0, points, "" if passed else SECRET))
    return dataclasses.replace(new_scorecard(exercise, "premium", "local", expected), tests=tests,
                               score=sum(t.score for t in tests), diagnosis=[] if hidden_passed else [HINT])


def graded(store, exercise, student: str, card: Scorecard) -> int:
    submission_id, _ = store.add_submission(student, EXERCISE, card.tier, f"{student}{card.score}" * 8,
                                            exercise.submission_file, f"# {card.score}\n".encode(), state="graded")
    store.save_scorecard(submission_id, card)
    return submission_id


def student_pages(browser, submission_id: int) -> dict[str, str]:
    pages = {}
    for path in (f"/submissions/{submission_id}", f"/submissions/{submission_id}/report", PAGE, "/history", "/"):
        response = browser.get(path)
        assert response.status_code == 200, (path, response.text[:300])
        pages[path] = response.text
    return pages


def hidden_names(card: Scorecard) -> set[str]:
    opened = {t.name for t in card.tests if t.suite in card.open_suites}
    return {t.name for t in card.tests if t.suite not in card.open_suites} - opened


def assert_withheld(pages: dict[str, str], card: Scorecard, until: str) -> None:
    for path, text in pages.items():
        leaked = [name for name in hidden_names(card) if name in text]
        assert not leaked, f"{path} names hidden tests before release: {leaked[:3]}"
        assert SECRET not in text and "first token a step late" not in text, path
        assert f"{card.score}/{card.max_score}" not in text and f"<b>{card.score}</b> of" not in text, path
    submission, report = (text for path, text in pages.items() if path.startswith("/submissions/"))
    held = sum(1 for t in card.tests if t.suite not in card.open_suites)
    for text in (submission, report):
        assert f"{held} more tests, worth 88 points, ran too: their results and your score come {until}." in text
    # The open suite's results are there as always.
    opened = [t.name for t in card.tests if t.suite in card.open_suites]
    assert all(name in report for name in opened) and "points in the open tests" in submission
    assert "open tests, more to come" in pages["/history"] and "open tests, more to come" in pages[PAGE]


def assert_shown(pages: dict[str, str], card: Scorecard) -> None:
    report = pages[next(p for p in pages if p.endswith("/report"))]
    assert all(name in report for name in hidden_names(card)) and SECRET in report
    assert f"{card.score}/{card.max_score} points on the premium tier" in pages[next(iter(pages))]
    assert "first token a step late" in pages[next(iter(pages))]
    assert "more to come" not in pages["/history"] and 'id="withheld"' not in report


def test_on_release_withholds_the_hidden_results_until_the_instructor_releases_them(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    store.set_exercise_terms(EXERCISE, {"release": "on_release"}, "the test")
    accounts.set_tier(store, "ada", "premium")
    ada, _ = sign_in("student", "ada")
    card = premium_card(exercise)
    submission_id = graded(store, exercise, "ada", card)
    assert_withheld(student_pages(ada, submission_id), card, "when your instructor releases them")

    instructor, csrf = sign_in("instructor")
    assert SECRET in instructor.get(f"/submissions/{submission_id}/report").text  # instructors see everything
    assert f"{card.score}/{card.max_score}" in instructor.get("/instructor/students/ada").text
    dashboard = instructor.get("/instructor").text
    line = re.search(rf'id="release-{EXERCISE}">(.*?)</div>', dashboard, re.S)
    assert line and "withheld until you release them" in line.group(1) and "Release results" in line.group(1)

    released = instructor.post(f"/instructor/exercises/{EXERCISE}/release", data={"csrf": csrf}, follow_redirects=False)
    assert released.status_code == 303 and released.headers["location"].startswith("/instructor?done=released")
    page = instructor.get(released.headers["location"]).text
    assert f"The results of {exercise.title} are released" in page
    line = re.search(rf'id="release-{EXERCISE}">(.*?)</div>', page, re.S)
    assert line and "by instructor (sign-in link" in line.group(1) and "Withhold again" in line.group(1)
    assert_shown(student_pages(ada, submission_id), card)

    withheld = instructor.post(f"/instructor/exercises/{EXERCISE}/withhold", data={"csrf": csrf},
                               follow_redirects=False)
    assert withheld.status_code == 303 and "done=withheld" in withheld.headers["location"]
    assert store.exercise_terms()[EXERCISE]["released_at"].value == ""
    assert_withheld(student_pages(ada, submission_id), card, "when your instructor releases them")


def test_the_release_buttons_need_the_form_token_and_an_instructor(site):  # noqa: F811
    _, _, sign_in, store, _ = site
    store.set_exercise_terms(EXERCISE, {"release": "on_release"}, "the test")
    instructor, _ = sign_in("instructor")
    ada, ada_csrf = sign_in("student", "ada")
    for action in ("release", "withhold"):
        refused = instructor.post(f"/instructor/exercises/{EXERCISE}/{action}", data={"csrf": "forged"})
        assert refused.status_code == 403 and "Form expired" in refused.text
        assert ada.post(f"/instructor/exercises/{EXERCISE}/{action}", data={"csrf": ada_csrf}).status_code == 403
    assert "released_at" not in store.exercise_terms()[EXERCISE]


def test_an_exercise_shown_at_once_has_nothing_to_release(site):  # noqa: F811
    _, _, sign_in, store, _ = site
    instructor, csrf = sign_in("instructor")
    assert "Results: shown at once." in instructor.get("/instructor").text
    refused = instructor.post(f"/instructor/exercises/{EXERCISE}/release", data={"csrf": csrf})
    assert refused.status_code == 400 and "shown at once: there is nothing to release" in refused.text
    assert EXERCISE not in store.exercise_terms()


def test_after_due_releases_at_the_due_date_on_the_services_clock(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    now = [DUE - timedelta(hours=1)]
    service.clock = lambda: now[0]
    store.set_exercise_terms(EXERCISE, {"release": "after_due", "due": DUE.isoformat()}, "the test")
    accounts.set_tier(store, "ada", "premium")
    ada, _ = sign_in("student", "ada")
    card = premium_card(exercise)
    submission_id = graded(store, exercise, "ada", card)
    assert_withheld(student_pages(ada, submission_id), card, "after the due date, 2026-12-20 23:59 UTC+01:00")
    instructor, _ = sign_in("instructor")
    assert "Results: released after the due date, 2026-12-20 23:59 UTC+01:00." in instructor.get("/instructor").text
    now[0] = DUE + timedelta(minutes=1)
    assert_shown(student_pages(ada, submission_id), card)
    assert "Results: released (the due date, 2026-12-20 23:59 UTC+01:00, has passed)." in \
        instructor.get("/instructor").text
    # A student whose own due date is later (an extension) may still hand in: theirs stay withheld until it.
    store.set_extension("ada", EXERCISE, DUE + timedelta(days=2))
    assert_withheld(student_pages(ada, submission_id), card, "after the due date, 2026-12-22 23:59 UTC+01:00")


def test_full_marks_withheld_open_no_solution_and_a_rejected_file_is_shown_as_always(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    service.exercises[EXERCISE] = exercise = dataclasses.replace(
        exercise, web=dataclasses.replace(exercise.web, solution="after_full_marks"))
    store.set_exercise_terms(EXERCISE, {"release": "on_release"}, "the test")
    accounts.set_tier(store, "ada", "premium")
    ada, _ = sign_in("student", "ada")
    full = premium_card(exercise, hidden_passed=True)
    submission_id = graded(store, exercise, "ada", full)
    assert full.score == full.max_score
    assert ada.get(f"{PAGE}/solution").status_code == 403, "full marks withheld opened the solution"
    assert 'id="score">36/36 points in the open tests' not in ada.get(f"/submissions/{submission_id}").text
    rejected = dataclasses.replace(new_scorecard(exercise, "premium", "local"), status="rejected",
                                   reason="line 1: invalid syntax")
    rejected_id = graded(store, exercise, "ada", rejected)
    page = ada.get(f"/submissions/{rejected_id}").text
    assert 'id="rejected"' in page and "invalid syntax" in page and 'id="withheld"' not in page
    store.set_exercise_terms(EXERCISE, {"released_at": DUE.isoformat()}, "the test")
    assert ada.get(f"{PAGE}/solution").status_code == 200


def test_the_class_site_downloads_as_a_zip_with_nobodys_id_or_name_unless_asked(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    roster = {"u7431": "Ada Lovelace", "u8812": "Grace Hopper", "u9020": "Edsger Dijkstra"}
    accounts.import_roster(store, "id,name,tier\n" + "".join(f"{sid},{name},premium\n" for sid, name in roster.items()))
    for sid in roster:
        graded(store, exercise, sid, premium_card(exercise, hidden_passed=sid == "u8812"))
    instructor, csrf = sign_in("instructor")
    dashboard = instructor.get("/instructor").text
    assert 'action="/instructor/site.zip"' in dashboard and "with students' real names and ids" in dashboard
    for policy in ("latest", "best", "on-time"):
        response = instructor.post("/instructor/site.zip", data={"csrf": csrf, "policy": policy})
        assert response.status_code == 200 and response.headers["content-type"] == "application/zip"
        assert f'filename="class-site-{policy}.zip"' in response.headers["content-disposition"]
        files = unzip(response.content)
        assert "index.html" in files and f"gradebook-{EXERCISE}.csv" in files
        assert sum(name.startswith("students/") for name in files) == 3
        for name, text in files.items():
            for word in (*roster, *roster.values(), *(n.split()[1] for n in roster.values())):
                assert word not in name and word not in text, f"{word!r} in {name} of the {policy} site"
    named = instructor.post("/instructor/site.zip", data={"csrf": csrf, "policy": "best", "names": "1"})
    files = unzip(named.content)
    assert 'filename="class-site-best-names.zip"' in named.headers["content-disposition"]
    assert {f"students/{sid}.html" for sid in roster} <= set(files) and "Ada Lovelace" in files[f"gradebook-{EXERCISE}.csv"]
    assert instructor.post("/instructor/site.zip", data={"csrf": "forged", "policy": "latest"}).status_code == 403
    assert instructor.post("/instructor/site.zip", data={"csrf": csrf, "policy": "../x"}).status_code == 400
    student, student_csrf = sign_in("student", "ada")
    assert student.post("/instructor/site.zip", data={"csrf": student_csrf}).status_code == 403


def unzip(data: bytes) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.testzip() is None
        return {name: archive.read(name).decode("utf-8") for name in archive.namelist()}


def test_a_card_with_nothing_hidden_or_not_graded_is_shown_whole(site):  # noqa: F811
    from grader.course.terms import Terms
    from grader.web.release import student_card

    service, *_ = site
    exercise = service.exercises[EXERCISE]
    held_back, now = Terms(release="on_release"), DUE
    free = dataclasses.replace(new_scorecard(exercise, "free", "local"), score=10)
    error = dataclasses.replace(premium_card(exercise), status="error", reason="the sandbox failed")
    for card in (free, error):
        assert student_card(card, held_back, now).card is card and student_card(card, held_back, now).held is None
    premium = premium_card(exercise)
    assert student_card(premium, None, now).held is None  # an instructor
    assert student_card(premium, Terms(release="after_due"), now).held is None  # no due date: released
    assert student_card(premium, Terms(release="on_release", released_at=now), now).held is None
    view = student_card(premium, held_back, now)
    assert view.held is not None and not view.full_marks
    assert {t.suite for t in view.card.tests} == {"visible"} and view.card.diagnosis == []
    assert (view.card.score, view.card.max_score) == (10, 10) and (view.held.tests, view.held.points) == (44, 88)
