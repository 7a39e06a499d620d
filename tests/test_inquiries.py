"""Grade inquiries and the TA role in-process: a student asks about a released grade (or one test of it)
within the course's window; instructors and TAs see the queue and its counts, answer, adjust, regrade,
resolve and reopen; the student reads the thread and the outcome; held-back tests are never named; every
form is CSRF-protected, bounded, paced, and ends with a redirect."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from grader.core.grading import new_scorecard
from grader.service import accounts, staff
from grader.service import inquiries as store_inquiries
from grader.service.inquiries import MESSAGE_LIMIT, OPEN_PER_STUDENT
from tests.helpers import EXERCISE
from tests.service import csrf_of, press_sign_in
from tests.test_release import graded, hidden_names, premium_card
from tests.test_web_in_process import site  # noqa: F401 (the fixture)

pytestmark = pytest.mark.unit


def ta_session(site, ta: str = "bea"):  # noqa: F811
    service, client, _, store, _ = site
    staff.add_ta(store, ta, "Bea Assistant")
    browser = client()
    link = f"/signin/{accounts.new_link(store, 'ta', ta_id=ta)}"
    page = browser.get(link).text
    assert f"Sign in as TA {ta} (Bea Assistant)" in page and "teaching assistant" in page
    assert press_sign_in(browser, link).status_code == 303
    home = browser.get("/", follow_redirects=False)
    assert home.status_code == 303 and home.headers["location"] == "/staff"
    return browser, csrf_of(browser.get("/staff"))


def test_a_student_asks_after_release_and_staff_answer_resolve_and_the_student_sees_the_outcome(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    store.set_exercise_terms(EXERCISE, {"release": "on_release"}, "the test")
    accounts.set_tier(store, "ada", "premium")
    ada, ada_csrf = sign_in("student", "ada")
    card = premium_card(exercise)
    sub = graded(store, exercise, "ada", card)
    hidden = sorted(hidden_names(card))
    hidden_id = next(t.id for t in card.tests if t.name == hidden[0])

    # Before release: no link to ask, no form, and no inquiry about a held-back test.
    assert 'id="ask"' not in ada.get(f"/submissions/{sub}").text
    early = ada.get(f"/submissions/{sub}/inquiry")
    assert early.status_code == 403 and "Not released yet" in early.text
    assert not any(name in early.text for name in hidden)
    sneaked = ada.post(f"/submissions/{sub}/inquiry", data={"csrf": ada_csrf, "about": hidden_id, "message": "?"})
    assert sneaked.status_code == 403 and store_inquiries.inquiries(store) == []

    instructor, csrf = sign_in("instructor")
    assert instructor.post(f"/instructor/exercises/{EXERCISE}/release", data={"csrf": csrf},
                           follow_redirects=False).status_code == 303
    assert f'href="/submissions/{sub}/inquiry"' in ada.get(f"/submissions/{sub}").text
    form = ada.get(f"/submissions/{sub}/inquiry")
    assert form.status_code == 200 and f'<option value="{hidden_id}">the test {hidden[0]}</option>' in form.text
    assert '<label for="message">' in form.text and '<label for="about">' in form.text
    asked = ada.post(f"/submissions/{sub}/inquiry", follow_redirects=False,
                     data={"csrf": ada_csrf, "about": hidden_id, "message": "Why did this one fail?\r\nIt looks right."})
    assert asked.status_code == 303
    thread_url = asked.headers["location"]
    assert re.fullmatch(r"/inquiries/\d+", thread_url)
    page = ada.get(thread_url).text
    assert f"the test {hidden[0]}" in page and "Why did this one fail?\nIt looks right." in page
    assert f"the test {hidden[0]}" in ada.get("/inquiries").text, "a released test is named in the student's list"

    # The queue, with its counts on both dashboards.
    assert re.search(r'id="inquiry-counts">.*?1 open', instructor.get("/instructor").text, re.S)
    ta, ta_csrf = ta_session(site)
    assert re.search(r'id="inquiry-counts">.*?1 open', ta.get("/staff").text, re.S)
    queue = ta.get("/inquiries").text
    assert f'href="{thread_url}"' in queue and "ada" in queue
    answered = ta.post(f"{thread_url}/reply", follow_redirects=False,
                       data={"csrf": ta_csrf, "message": "The hidden test sends 8 bytes.", "resolve": "1"})
    assert answered.status_code == 303
    assert store_inquiries.inquiries(store)[0].state == "resolved"
    assert re.search(r'id="inquiry-counts">.*?0 open', ta.get("/staff").text, re.S)

    # The instructor adjusts; the student reads the answer and the grade as it stands.
    adjusted = instructor.post(f"/submissions/{sub}/adjust", follow_redirects=False,
                               data={"csrf": csrf, "points": "3", "comment": "the hidden test was too strict"})
    assert adjusted.status_code == 303
    page = ada.get(thread_url).text
    assert "The hidden test sends 8 bytes." in page and "Teaching assistant" in page and "Resolved" in page
    outcome = re.search(r'<p id="outcome">(.*?)</p>', page, re.S).group(1)
    assert f"{card.score}/{card.max_score}" in outcome and "+3" in outcome and "too strict" in outcome

    # The student writes again: the inquiry reopens.
    again = ada.post(f"{thread_url}/reply", data={"csrf": ada_csrf, "message": "Thanks, and the next one?"},
                     follow_redirects=False)
    assert again.status_code == 303 and store_inquiries.inquiries(store)[0].state == "open"
    assert "Reopened the inquiry." in ada.get(thread_url).text

    # Withheld again: the thread no longer names the held-back test, nor shows the score.
    assert instructor.post(f"/instructor/exercises/{EXERCISE}/withhold", data={"csrf": csrf},
                           follow_redirects=False).status_code == 303
    page = ada.get(thread_url).text
    assert not any(name in page for name in hidden) and "withheld again" in page
    assert f"{card.score}/{card.max_score}" not in page
    assert hidden[0] in ta.get(thread_url).text, "staff see every test"
    for path in ("/inquiries", f"/submissions/{sub}/inquiry"):
        assert not any(name in ada.get(path).text for name in hidden), path

    # After the course's window: too late to ask.
    assert instructor.post(f"/instructor/exercises/{EXERCISE}/release", data={"csrf": csrf},
                           follow_redirects=False).status_code == 303
    later = service.clock() + timedelta(days=staff.DEFAULT_WINDOW_DAYS, minutes=1)
    service.clock = lambda: later
    late = ada.get(f"/submissions/{sub}/inquiry")
    assert late.status_code == 403 and "Too late to ask" in late.text


def test_inquiry_forms_are_bounded_paced_and_protected(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    subs = [graded(store, exercise, "ada", premium_card(exercise, hidden_passed=n % 2 == 0)) for n in range(1)]
    for n in range(OPEN_PER_STUDENT):
        submission_id, _ = store.add_submission("ada", EXERCISE, "free", f"{n}" * 64, exercise.submission_file,
                                                f"# {n}\n".encode(), state="graded")
        store.save_scorecard(submission_id, new_scorecard(exercise, "free", "local"))
        subs.append(submission_id)
    ada, csrf = sign_in("student", "ada")
    bob, bob_csrf = sign_in("student", "bob")
    ask = f"/submissions/{subs[0]}/inquiry"

    too_long = ada.post(ask, data={"csrf": csrf, "message": "x" * (MESSAGE_LIMIT + 1)})
    assert too_long.status_code == 413 and f"at most {MESSAGE_LIMIT} characters" in too_long.text
    empty = ada.post(ask, data={"csrf": csrf, "message": "  "})
    assert empty.status_code == 400 and "empty" in empty.text
    unknown = ada.post(ask, data={"csrf": csrf, "about": "no::such", "message": "?"})
    assert unknown.status_code == 400 and "No such test" in unknown.text
    forged = ada.post(ask, data={"csrf": "forged", "message": "?"})
    assert forged.status_code == 403 and "Form expired" in forged.text
    assert store_inquiries.inquiries(store) == []

    first = ada.post(ask, data={"csrf": csrf, "message": "Why?"}, follow_redirects=False)
    assert first.status_code == 303
    twice = ada.post(ask, data={"csrf": csrf, "message": "Why, again?"})
    assert twice.status_code == 409 and "still open" in twice.text
    for submission_id in subs[1:OPEN_PER_STUDENT]:
        assert ada.post(f"/submissions/{submission_id}/inquiry", data={"csrf": csrf, "message": "?"},
                        follow_redirects=False).status_code == 303
    over = ada.post(f"/submissions/{subs[OPEN_PER_STUDENT]}/inquiry", data={"csrf": csrf, "message": "?"})
    assert over.status_code == 429 and f"{OPEN_PER_STUDENT} grade inquiries open" in over.text
    assert len(store_inquiries.inquiries(store)) == OPEN_PER_STUDENT

    # Another student's inquiry and submission are not there for bob.
    mine = first.headers["location"]
    assert bob.get(mine).status_code == 404
    assert bob.post(f"{mine}/reply", data={"csrf": bob_csrf, "message": "me too"}).status_code == 404
    assert bob.get(ask).status_code == 404
    # A student neither resolves nor regrades; a TA does not set the course's window.
    assert ada.post(f"{mine}/resolve", data={"csrf": csrf}).status_code == 403
    ta, ta_csrf = ta_session(site)
    refused = ta.post("/instructor/inquiry-settings", data={"csrf": ta_csrf, "window_days": "30"})
    assert refused.status_code == 403 and staff.inquiry_window_days(store) == staff.DEFAULT_WINDOW_DAYS


def test_staff_regrade_resolve_reopen_and_the_courses_settings(site):  # noqa: F811
    service, _, sign_in, store, recorded = site
    exercise = service.exercises[EXERCISE]
    sub = graded(store, exercise, "ada", premium_card(exercise))
    ada, csrf = sign_in("student", "ada")
    thread = ada.post(f"/submissions/{sub}/inquiry", data={"csrf": csrf, "message": "Regrade please"},
                      follow_redirects=False).headers["location"]
    ta, ta_csrf = ta_session(site)
    for action, state in (("resolve", "resolved"), ("reopen", "open"), ("regrade", "open")):
        done = ta.post(f"{thread}/{action}", data={"csrf": ta_csrf}, follow_redirects=False)
        assert done.status_code == 303 and done.headers["location"].startswith(thread)
        assert store_inquiries.inquiries(store)[0].state == state
    assert recorded.queued == [sub] and store.submission(sub).state == "queued"
    kinds = [p.kind for p in store_inquiries.posts(store, store_inquiries.inquiries(store)[0].id)]
    assert kinds == ["message", "resolved", "reopened", "regrade"]
    assert "Asked for the submission to be graded again." in ada.get(thread).text

    # TAs adjust only where the course allows it, and the instructor sets the window.
    assert 'id="adjust"' not in ta.get(f"/submissions/{sub}").text
    assert ta.post(f"/submissions/{sub}/adjust", data={"csrf": ta_csrf, "points": "1", "comment": "x"}).status_code == 403
    instructor, icsrf = sign_in("instructor")
    bad = instructor.post("/instructor/inquiry-settings", data={"csrf": icsrf, "window_days": "soon"})
    assert bad.status_code == 400 and "whole number" in bad.text
    saved = instructor.post("/instructor/inquiry-settings", follow_redirects=False,
                            data={"csrf": icsrf, "window_days": "0", "ta_may_adjust": "1"})
    assert saved.status_code == 303 and staff.inquiry_window_days(store) == 0 and staff.ta_may_adjust(store)
    assert 'id="adjust"' in ta.get(f"/submissions/{sub}").text
    closed = ada.get(f"/submissions/{sub}/inquiry")
    assert closed.status_code == 403 and "takes no grade inquiries" in closed.text


def test_a_ta_is_listed_on_the_dashboard_and_revoking_signs_them_out(site):  # noqa: F811
    _, _, sign_in, store, _ = site
    ta, _ = ta_session(site)
    instructor, csrf = sign_in("instructor")
    row = re.search(r'id="tas">.*?</section>', instructor.get("/instructor").text, re.S).group(0)
    assert "bea" in row and "Bea Assistant" in row and "active" in row
    imported = instructor.post("/instructor/roster", data={"csrf": csrf, "csv": "id,name,role\ncy,Cy Grader,ta\n"})
    assert imported.status_code == 200
    link = re.search(r'<td>cy \(TA\)</td><td class="link">http://testserver(/signin/[^<]+)</td>', imported.text)
    assert link, imported.text[:2000]
    cy = site[1]()
    assert press_sign_in(cy, link.group(1)).status_code == 303 and cy.get("/staff").status_code == 200
    assert [t.id for t in staff.teaching_assistants(store)] == ["bea", "cy"] and accounts.student(store, "cy") is None
    done = instructor.post("/instructor/tas/bea/revoke", data={"csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/instructor#tas"
    assert ta.get("/staff").status_code == 401
    assert not staff.teaching_assistants(store)[0].link_active
    assert instructor.post("/instructor/tas/nobody/revoke", data={"csrf": csrf}).status_code == 404
