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


def test_a_card_with_nothing_hidden_is_shown_whole_and_an_error_keeps_back_only_its_reason(site):  # noqa: F811
    from grader.course.terms import Terms
    from grader.web.release import student_card

    service, *_ = site
    exercise = service.exercises[EXERCISE]
    held_back, now = Terms(release="on_release"), DUE
    free = dataclasses.replace(new_scorecard(exercise, "free", "local"), score=10)
    error = dataclasses.replace(premium_card(exercise), status="error", reason="the sandbox failed")
    assert student_card(free, held_back, now).card is free and student_card(free, held_back, now).held is None
    shown_error = student_card(error, held_back, now)
    assert shown_error.card.status == "error" and shown_error.held is None and "sandbox" not in shown_error.card.reason
    assert {t.suite for t in shown_error.card.tests} == set(error.open_suites)
    premium = premium_card(exercise)
    assert student_card(premium, None, now).held is None  # an instructor
    assert student_card(premium, Terms(release="after_due"), now).held is None  # no due date: released
    assert student_card(premium, Terms(release="on_release", released_at=now), now).held is None
    view = student_card(premium, held_back, now)
    assert view.held is not None and not view.full_marks
    assert {t.suite for t in view.card.tests} == {"visible"} and view.card.diagnosis == []
    assert (view.card.score, view.card.max_score) == (10, 10) and (view.held.tests, view.held.points) == (44, 88)


def looping_card(exercise, loops: bool) -> Scorecard:
    """A premium card whose open tests all passed in the same time; its first hidden test passed at once, or
    looped to its 60 s limit (the run then taking 62 s instead of 4.4 s), the machine busy beside it."""
    card = premium_card(exercise, hidden_passed=not loops)
    tests = []
    for test in card.tests:
        hidden = test.suite not in card.open_suites
        slow = hidden and loops and test.status == "failed"
        tests.append(dataclasses.replace(test, status="timeout" if slow else test.status,
                                         duration_s=60.0 if slow else 0.01 if hidden else 0.25,
                                         cpu_wait_s=3.0 if loops else 0.0))
    return dataclasses.replace(card, tests=tests, duration_s=62.0 if loops else 4.4,
                               graded_at="2026-12-01T10:01:02+00:00" if loops else "2026-12-01T10:00:04+00:00")


def unnumbered(page: str) -> str:
    """A page without its submission's number, the moment it was handed in and its form token."""
    page = re.sub(r'name="csrf" value="[^"]+"', "", page)
    page = re.sub(r"\d\d:\d\d:\d\d UTC", "(handed in)", page)  # the two were handed in a second apart
    return re.sub(r"(?<=<tr><td>)\d+(?=</td>)|(?<=[Ss]ubmission )\d+|(?<=/submissions/)\d+|(?<=#)\d+", "N", page)


def test_before_release_no_time_of_the_run_tells_a_student_how_the_hidden_tests_went(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    store.set_exercise_terms(EXERCISE, {"release": "on_release"}, "the test")
    accounts.import_roster(store, "id,name,tier\nada,Ada,premium\ngrace,Grace,premium\n")
    pages = {}
    for student, loops in (("ada", True), ("grace", False)):
        browser, _ = sign_in("student", student)
        card = looping_card(exercise, loops)
        submission_id, _ = store.add_submission(student, EXERCISE, card.tier, "ab" * 32, exercise.submission_file,
                                                b"# the same file\n", state="graded")
        store.save_scorecard(submission_id, card)
        pages[student] = {path.replace(str(submission_id), "N"): unnumbered(text)
                          for path, text in student_pages(browser, submission_id).items()}
    for path, text in pages["ada"].items():
        for figure in ("62.0 s", "62 s", "4.4 s", "1.0 min", "10:01", "10:00", "busy during this test"):
            assert figure not in text, f"{path} shows {figure!r} before release"
    # The pages of the looping run and of the quick one are the same but for the student's name.
    for path in pages["ada"]:
        assert pages["ada"][path].replace("ada", "X").replace("Ada", "X") == \
            pages["grace"][path].replace("grace", "X").replace("Grace", "X"), path


def test_the_site_zip_leaves_out_results_students_cannot_see_yet(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    store.set_exercise_terms(EXERCISE, {"release": "on_release"}, "the test")
    accounts.import_roster(store, "id,name,tier\nu7431,Ada,premium\n")
    card = premium_card(exercise)
    graded(store, exercise, "u7431", card)
    instructor, csrf = sign_in("instructor")
    assert "Results your students cannot see yet" in instructor.get("/instructor").text
    for names in ("", "1"):
        files = unzip(instructor.post("/instructor/site.zip", data={"csrf": csrf, "policy": "best",
                                                                    "names": names}).content)
        text = "\n".join(files.values())
        leaked = [name for name in hidden_names(card) if name in text]
        assert not leaked and SECRET not in text and str(card.score) not in files.get(f"gradebook-{EXERCISE}.csv", "")
        assert not any(name.startswith("students/") for name in files)
    instructor.post(f"/instructor/exercises/{EXERCISE}/release", data={"csrf": csrf})
    files = unzip(instructor.post("/instructor/site.zip", data={"csrf": csrf, "policy": "best"}).content)
    assert any(name in "\n".join(files.values()) for name in hidden_names(card))
    assert sum(name.startswith("students/") for name in files) == 1


def test_before_release_an_error_card_keeps_back_why_when_its_tier_runs_hidden_suites(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    store.set_exercise_terms(EXERCISE, {"release": "on_release"}, "the test")
    accounts.import_roster(store, "id,name,tier\nada,Ada,premium\nbob,Bob,free\n")
    card = premium_card(exercise)
    hidden = sorted(hidden_names(card))[0]
    broken = dataclasses.replace(card, status="error", score=0, reason=f"no result for 1 test(s): hidden::{hidden}")
    submission_id = graded(store, exercise, "ada", broken)
    ada, _ = sign_in("student", "ada")
    for path, text in student_pages(ada, submission_id).items():
        assert hidden not in text and "no result for" not in text, path
    assert "The grading failed" in ada.get(f"/submissions/{submission_id}/report").text
    instructor, _ = sign_in("instructor")
    assert f"hidden::{hidden}" in instructor.get(f"/submissions/{submission_id}/report").text
    # A free card runs the open suites only: its error is shown as always.
    free = dataclasses.replace(new_scorecard(exercise, "free", "local"), status="error", reason="the sandbox broke")
    free_id = graded(store, exercise, "bob", free)
    bob, _ = sign_in("student", "bob")
    assert "the sandbox broke" in bob.get(f"/submissions/{free_id}/report").text


def test_before_release_the_open_results_come_in_an_order_no_hidden_test_sets(site):  # noqa: F811
    from grader.course.terms import Terms
    from grader.web.release import student_card

    service, *_ = site
    card = premium_card(service.exercises[EXERCISE])
    shuffled = dataclasses.replace(card, tests=list(reversed(card.tests)))  # the same results, come in otherwise
    held_back = Terms(release="on_release")
    assert student_card(card, held_back, DUE).card.tests == student_card(shuffled, held_back, DUE).card.tests
