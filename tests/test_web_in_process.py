"""The service in-process (Starlette's TestClient on a SQLite store), in the fast loop: sign-in links,
roles, CSRF, body limits, the pace of submissions, whose submission is whose; the dashboard flags
scorecards of another grader; a store outage is the service's own 503 page."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import time
from types import SimpleNamespace

import pytest
from starlette.testclient import TestClient

from grader.core.exercise import load_exercise
from grader.core.grading import new_scorecard
from grader.course.store import Store
from grader.service import accounts
from grader.web.app import Service, create_app
from grader.web.auth import COOKIE, SIGNIN_COOKIE
from grader.web.instructor import NEW_LINKS_COOKIE
from tests.helpers import EXERCISE
from tests.service import SIGNIN_FORM, csrf_of, press_sign_in


class Recorded:
    """A queue that keeps what it is sent; `why` is what it says of its graders' health."""

    def __init__(self) -> None:
        self.queued: list[int] = []
        self.why: list[str] = []

    def enqueue(self, submission_id: int) -> None:
        self.queued.append(submission_id)

    def health(self) -> list[str]:
        return self.why


@pytest.fixture
def dashboard(tmp_path):
    exercise = load_exercise(EXERCISE)
    store = Store(tmp_path / "grader.db")
    store.migrate()
    service = Service(store=store, dispatcher=Recorded(), exercises={exercise.slug: exercise},
                      base_url="http://testserver")
    client = TestClient(create_app(service))
    token = accounts.new_link(store, "instructor")
    response = press_sign_in(client, f"/signin/{token}")
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


@pytest.mark.unit
def test_scorecards_of_another_grader_are_flagged_for_a_regrade(dashboard):
    exercise, grade, page = dashboard
    grade("ada", None)
    assert f'id="stale-{exercise.slug}"' not in page(), "a scorecard of this very grader was flagged"
    grade("bob", "0123456789abcdef")
    grade("cy", "fedcba9876543210")
    flag = re.search(rf'id="stale-{exercise.slug}">([^<]*)<', page())
    assert flag, "scorecards of another grader went unflagged"
    assert flag.group(1).startswith("2 scorecard(s)") and "regrade" in flag.group(1)


@pytest.mark.unit
def test_a_store_outage_is_the_services_own_503_page_on_every_route(tmp_path):
    """A PostgreSQL restart or a lost connection: sign-in and every other page say the service is back in a
    moment (503, Retry-After), never a bare 500."""
    from sqlalchemy import create_engine

    exercise = load_exercise(EXERCISE)
    store = Store(tmp_path / "grader.db")
    service = Service(store=store, dispatcher=Recorded(), exercises={exercise.slug: exercise},
                      base_url="http://testserver")
    client = TestClient(create_app(service), raise_server_exceptions=False)
    signed_in = press_sign_in(client, f"/signin/{accounts.new_link(store, 'instructor')}")
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


# Routes and rules, in-process: sign-in links, roles, CSRF, body limits, the pace of submissions, and
# whose submission is whose. The real-server tests (tests/test_web.py) add grading and the queue.

PAGE = f"/exercises/{EXERCISE}"


@pytest.fixture
def site(tmp_path):
    """(service, a client factory, a sign-in helper, the store), on a store with two students."""
    exercise = load_exercise(EXERCISE)
    store = Store(tmp_path / "grader.db")
    store.migrate()
    recorded = Recorded()
    service = Service(store=store, dispatcher=recorded, exercises={exercise.slug: exercise},
                      base_url="http://testserver", max_request_bytes=64 * 1024, submission_interval_s=60)
    app = create_app(service)
    for student in ("ada", "bob"):
        accounts.add_student(store, student)

    def client() -> TestClient:
        return TestClient(app, raise_server_exceptions=False)

    def sign_in(role: str, student: str | None = None) -> tuple[TestClient, str]:
        browser = client()
        pressed = press_sign_in(browser, f"/signin/{accounts.new_link(store, role, student)}")
        assert pressed.status_code == 303, pressed.text[:500]
        page = browser.get("/")
        assert page.status_code == 200, page.text[:500]
        if student is not None:  # the prediction comes before the editor
            answer = browser.post(f"{PAGE}/prediction", data={"csrf": csrf_of(page), "choice": "2"})
            assert answer.status_code == 200, answer.text[:500]
        return browser, csrf_of(page)

    yield service, client, sign_in, store, recorded
    store.close()


@pytest.mark.unit
def test_signed_out_every_page_asks_for_a_sign_in(site):
    _, client, _, _, _ = site
    for path in ("/history", PAGE, "/submissions/1", "/submissions/1/report", "/instructor"):
        assert client().get(path).status_code == 401, path
    assert client().post(f"{PAGE}/submit", data={"code": "x = 1\n"}).status_code == 401


@pytest.mark.unit
def test_an_unknown_link_signs_nobody_in_and_a_one_time_link_works_once(site):
    _, client, _, store, _ = site
    assert client().get("/signin/not-a-token", follow_redirects=False).status_code == 403
    token = accounts.new_link(store, "instructor")
    browser = client()
    opened = browser.get(f"/signin/{token}", follow_redirects=False)
    assert opened.status_code == 200 and COOKIE not in opened.cookies  # opening it uses nothing
    used = browser.post(f"/signin/{token}", data={"csrf": SIGNIN_FORM.search(opened.text).group(2)},
                        follow_redirects=False)
    assert used.status_code == 303 and COOKIE in used.cookies
    late = client()
    assert late.get(f"/signin/{token}").status_code == 403
    assert late.post(f"/signin/{token}", data={"csrf": "x" * 32}).status_code == 403


# Who may use each route: every route of the service (the LTI ones too) is in this table, and a route
# added without a line here fails the test. S: a student, T: a teaching assistant, INS: an instructor;
# "public": no session needed (signing in, the LMS's login and launch, the tool's keys).
S, T, INS = "student", "ta", "instructor"
ROUTE_TABLE = [
    ("/favicon.ico", "GET", "/favicon.ico", "public"),
    ("/signin/{token}", "GET", "/signin/not-a-token", "public"),
    ("/signin/{token}", "POST", "/signin/not-a-token", "public"),
    ("/", "GET", "/", {S, T, INS}),
    ("/history", "GET", "/history", {S}),
    ("/exercises/{slug}", "GET", PAGE, {S, T, INS}),
    ("/exercises/{slug}/prediction", "POST", f"{PAGE}/prediction", {S}),
    ("/exercises/{slug}/submit", "POST", f"{PAGE}/submit", {S}),
    ("/exercises/{slug}/solution", "GET", f"{PAGE}/solution", {S, T, INS}),
    ("/submissions/{id}", "GET", "/submissions/{sub}", {S, T, INS}),
    ("/submissions/{id}/report", "GET", "/submissions/{sub}/report", {S, T, INS}),
    ("/submissions/{id}/adjust", "POST", "/submissions/{sub}/adjust", {INS}),  # a TA too where the course allows
    ("/submissions/{id}/inquiry", "GET", "/submissions/{sub}/inquiry", {S}),
    ("/submissions/{id}/inquiry", "POST", "/submissions/{sub}/inquiry", {S}),
    ("/inquiries", "GET", "/inquiries", {S, T, INS}),
    ("/inquiries/{id}", "GET", "/inquiries/{inquiry}", {S, T, INS}),
    ("/inquiries/{id}/reply", "POST", "/inquiries/{inquiry}/reply", {S, T, INS}),
    ("/inquiries/{id}/{action}", "POST", "/inquiries/{inquiry}/reopen", {T, INS}),
    ("/staff", "GET", "/staff", {T, INS}),
    ("/staff/students/{student}", "GET", "/staff/students/bob", {T, INS}),
    ("/instructor/inquiry-settings", "POST", "/instructor/inquiry-settings", {INS}),
    ("/instructor", "GET", "/instructor", {INS}),
    ("/instructor/tas/{ta}/revoke", "POST", "/instructor/tas/bea/revoke", {INS}),  # last but one: bea signed out
    ("/instructor/roster", "POST", "/instructor/roster", {INS}),
    ("/instructor/students/{student}", "GET", "/instructor/students/bob", {INS}),
    ("/instructor/students/{student}/link", "GET", "/instructor/students/bob/link", {INS}),
    ("/instructor/students/{student}/link", "POST", "/instructor/students/bob/link", {INS}),
    ("/instructor/students/{student}/revoke", "GET", "/instructor/students/bob/revoke", {INS}),
    ("/instructor/students/{student}/revoke", "POST", "/instructor/students/bob/revoke", {INS}),
    ("/instructor/students/{student}/{action}", "POST", "/instructor/students/bob/tier", {INS}),
    ("/instructor/students/{student}/{action}", "POST", "/instructor/students/bob/extension", {INS}),
    ("/instructor/regrade/{slug}", "GET", f"/instructor/regrade/{EXERCISE}", {INS}),
    ("/instructor/regrade/{slug}", "POST", f"/instructor/regrade/{EXERCISE}", {INS}),
    ("/instructor/exercises/{slug}", "GET", f"/instructor/exercises/{EXERCISE}", {INS}),
    ("/instructor/exercises/{slug}", "POST", f"/instructor/exercises/{EXERCISE}", {INS}),
    ("/instructor/link", "POST", "/instructor/link", {INS}),
    ("/instructor/exercises/{slug}/release", "POST", f"/instructor/exercises/{EXERCISE}/release", {INS}),
    ("/instructor/exercises/{slug}/withhold", "POST", f"/instructor/exercises/{EXERCISE}/withhold", {INS}),
    ("/instructor/site.zip", "POST", "/instructor/site.zip", {INS}),
    ("/instructor/site/{name:path}", "GET", "/instructor/site/index.html", {INS}),
    ("/instructor/gradebook.csv", "GET", "/instructor/gradebook.csv", {INS}),
    ("/instructor/similarity/{slug}", "GET", f"/instructor/similarity/{EXERCISE}", {INS}),
    ("/instructor/similarity/{slug}/{rank}", "GET", f"/instructor/similarity/{EXERCISE}/1", {INS}),
    ("/lti/jwks", "GET", "/lti/jwks", "public"),
    ("/lti/login", "GET", "/lti/login", "public"),
    ("/lti/login", "POST", "/lti/login", "public"),
    ("/lti/launch", "POST", "/lti/launch", "public"),
    ("/instructor/lti/retry", "POST", "/instructor/lti/retry", {INS}),
    ("/instructor/lti/sync-roster", "POST", "/instructor/lti/sync-roster", {INS}),
    ("/signout", "POST", "/signout", {S, T, INS}),  # last: it ends the session
]


def routes_of(app: object) -> list:
    while not hasattr(app, "routes"):  # the access log and the guard wrap the application
        app = app.app  # type: ignore[attr-defined]
    return app.routes  # type: ignore[attr-defined]


@pytest.mark.unit
def test_each_route_serves_students_tas_and_instructors_as_the_table_says(site):
    """The student / TA / instructor split, route by route: a route refuses whoever the table leaves out
    (403 "Not for you", before anything is done), and serves (or refuses for another reason: a bad form,
    nothing to release) whoever it names. A TA adjusts only where the course allows it."""
    from grader.lti.mount import lti_pages
    from grader.service import inquiries, staff

    service, _, _, store, _ = site
    app = create_app(service, lti_pages())
    listed = {(path, method) for path, method, _, _ in ROUTE_TABLE}
    served = {(route.path, method) for route in routes_of(app) for method in (route.methods or ()) if method != "HEAD"}
    assert served == listed, f"routes missing from the table: {served - listed}; gone: {listed - served}"
    exercise = service.exercises[EXERCISE]
    sub, _ = store.add_submission("ada", EXERCISE, "free", "a" * 64, exercise.submission_file, b"pass\n",
                                  state="graded")
    store.save_scorecard(sub, new_scorecard(exercise, "free", "local"))
    inquiry = inquiries.open_inquiry(store, sub, "ada", EXERCISE, "", "", "Why?", "student ada", service.clock())
    staff.add_ta(store, "bea", "Bea Assistant")
    links = {S: accounts.new_link(store, "student", "ada"), T: accounts.new_link(store, "ta", ta_id="bea"),
             INS: accounts.new_link(store, "instructor")}
    for role in (S, T, INS):
        browser = TestClient(app, raise_server_exceptions=False)
        assert press_sign_in(browser, f"/signin/{links[role]}").status_code == 303
        csrf = csrf_of(browser.get("/exercises/" + EXERCISE))
        for _, method, concrete, allowed in ROUTE_TABLE:
            path = concrete.format(sub=sub, inquiry=inquiry)
            answer = browser.request(method, path, data={"csrf": csrf} if method == "POST" else None,
                                     follow_redirects=False)
            assert answer.status_code not in (401, 500), (role, method, path, answer.status_code, answer.text[:300])
            refused = answer.status_code == 403 and "Not for you" in answer.text
            assert refused == (allowed != "public" and role not in allowed), (role, method, path, answer.status_code)
    # Where the course lets TAs adjust grades, the adjust route serves them.
    staff.set_setting(store, staff.TA_MAY_ADJUST, "1")
    browser = TestClient(app, raise_server_exceptions=False)
    assert press_sign_in(browser, f"/signin/{accounts.new_link(store, 'ta', ta_id='bea')}").status_code == 303
    csrf = csrf_of(browser.get(f"/submissions/{sub}"))
    adjusted = browser.post(f"/submissions/{sub}/adjust", data={"csrf": csrf, "points": "2", "comment": "waived"},
                            follow_redirects=False)
    assert adjusted.status_code == 303 and store.adjustments()[("ada", EXERCISE)].by == "TA bea"


@pytest.mark.unit
def test_a_form_without_the_sessions_token_is_refused_and_stores_nothing(site):
    _, _, sign_in, store, recorded = site
    browser, _ = sign_in("student", "ada")
    _, other = sign_in("student", "bob")
    for data in ({"code": "x = 1\n"}, {"code": "x = 1\n", "csrf": "forged"}, {"code": "x = 1\n", "csrf": other}):
        refused = browser.post(f"{PAGE}/submit", data=data)
        assert refused.status_code == 403 and "Form expired" in refused.text
    assert recorded.queued == [] and store.submissions(EXERCISE, "ada") == []


@pytest.mark.unit
def test_a_body_over_the_limit_is_refused_with_413(site):
    _, _, sign_in, _, recorded = site
    browser, csrf = sign_in("student", "ada")
    refused = browser.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x" * (80 * 1024)})
    assert refused.status_code == 413 and recorded.queued == []


@pytest.mark.unit
def test_a_submission_is_queued_and_a_second_too_soon_says_how_long_to_wait(site):
    _, _, sign_in, _, recorded = site
    browser, csrf = sign_in("student", "ada")
    first = browser.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x = 1\n"}, follow_redirects=False)
    assert first.status_code == 303 and re.fullmatch(r"/submissions/\d+", first.headers["location"])
    assert len(recorded.queued) == 1
    again = browser.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x = 2\n# mine\n"})
    assert again.status_code == 429
    wait = re.search(r"you can submit again in (\d+) s\b", again.text)
    assert wait and 1 <= int(wait.group(1)) <= 60
    assert "# mine" in again.text and len(recorded.queued) == 1  # the code typed stays in the editor


@pytest.mark.unit
def test_a_student_never_reaches_another_students_submission(site):
    _, _, sign_in, _, _ = site
    owner, csrf = sign_in("student", "ada")
    mine = owner.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x = 1\n"}, follow_redirects=False)
    path = mine.headers["location"]
    assert owner.get(path).status_code == 200
    other, _ = sign_in("student", "bob")
    for where in (path, f"{path}/report"):
        assert other.get(where).status_code == 404, where


@pytest.mark.unit
def test_a_refused_roster_keeps_the_text_pasted_and_names_its_line(site):
    _, _, sign_in, _, _ = site
    browser, csrf = sign_in("instructor")
    pasted = 'id,name\nzed,"Z\n'
    refused = browser.post("/instructor/roster", data={"csrf": csrf, "csv": pasted})
    assert refused.status_code == 400 and "roster line 2" in refused.text
    kept = re.search(r'<textarea name="csv"[^>]*>([^<]*)</textarea>', refused.text)
    assert kept and kept.group(1) == 'id,name\nzed,&#34;Z\n'


@pytest.mark.unit
def test_an_instructor_makes_a_new_instructor_link_that_signs_in_once(site):
    _, client, sign_in, _, _ = site
    browser, csrf = sign_in("instructor")
    made = browser.post("/instructor/link", data={"csrf": csrf}, follow_redirects=False)
    assert made.status_code == 303 and "/signin/" not in made.headers["location"]  # never in an address
    page = browser.get(made.headers["location"])
    link = re.search(r'<td class="link">http://testserver(/signin/[^<]+)</td>', page.text)
    assert link, page.text[:2000]
    reloaded = browser.get(made.headers["location"]).text
    assert link.group(1) not in reloaded and "shown once" in reloaded  # a reload makes and shows nothing
    other = client()
    assert press_sign_in(other, link.group(1)).status_code == 303
    assert client().get(link.group(1)).status_code == 403
    student, student_csrf = sign_in("student", "ada")
    assert student.post("/instructor/link", data={"csrf": student_csrf}).status_code == 403


@pytest.mark.unit
def test_the_command_line_prints_a_working_instructor_link(site, capsys):
    from grader.cli import main

    _, client, _, store, _ = site
    assert main(["roster", "instructor-link", "--db", str(store.location), "--base-url", "http://testserver"]) == 0
    link = re.search(r"http://testserver(/signin/\S+)", capsys.readouterr().out)
    assert link and press_sign_in(client(), link.group(1)).status_code == 303


@pytest.mark.unit
def test_the_editor_opens_with_the_latest_submission_and_its_page_shows_the_code_graded(site):
    _, _, sign_in, _, _ = site
    browser, csrf = sign_in("student", "ada")
    editor = re.compile(r'<textarea id="code"[^>]*>(.*?)</textarea>', re.S)
    assert "class Scheduler" in editor.search(browser.get(PAGE).text).group(1)  # the stub, before anything
    code = "x = 1  # mine </textarea><script>alert(1)</script>\n"
    sent = browser.post(f"{PAGE}/submit", data={"csrf": csrf, "code": code}, follow_redirects=False)
    path = sent.headers["location"]
    held = editor.search(browser.get(PAGE).text).group(1)
    assert "x = 1  # mine" in held and "<script>" not in held and "&lt;script&gt;" in held
    for reader in (browser, sign_in("instructor")[0]):
        page = reader.get(path)
        assert page.status_code == 200 and 'id="code-graded"' in page.text
        assert "x = 1  # mine &lt;/textarea&gt;&lt;script&gt;" in page.text and "<script>alert" not in page.text


@pytest.mark.unit
def test_a_free_tier_score_says_its_tier_and_is_never_shown_as_the_exercises_full_marks(site):
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    assert exercise.top_tier != "free"
    browser, _ = sign_in("student", "ada")
    for tier in ("free", exercise.top_tier):
        submission_id, _ = store.add_submission("ada", EXERCISE, tier, tier * 8, exercise.submission_file,
                                                f"# {tier}\n".encode(), state="graded")
        card = dataclasses.replace(new_scorecard(exercise, tier, "local"), score=10, max_score=10)
        store.save_scorecard(submission_id, card)
        page = browser.get(f"/submissions/{submission_id}").text
        score = re.search(r'<span class="(\w+)" id="score">([^<]*)</span>', page)
        assert score and score.group(2) == f"10/10 points on the {tier} tier"
        if tier == "free":
            assert score.group(1) != "good" and 'id="tier-note"' in page
        else:
            assert score.group(1) == "good" and 'id="tier-note"' not in page
    assert re.search(r"10/10 <span class=\"muted\">free</span>", browser.get("/history").text)


@pytest.mark.unit
def test_a_locked_solution_says_why_in_the_words_that_fit_the_student(site):
    _, _, sign_in, store, _ = site
    free, _ = sign_in("student", "ada")
    refused = free.get(f"{PAGE}/solution")
    assert refused.status_code == 403 and "part of Premium" in refused.text
    accounts.set_tier(store, "bob", "premium")
    premium, _ = sign_in("student", "bob")
    locked = premium.get(f"{PAGE}/solution")  # nothing submitted yet: the exercise's rule keeps it closed
    assert locked.status_code == 403 and "Not open yet" in locked.text
    assert "part of Premium" not in locked.text and "Premium</h1>" not in locked.text


@pytest.mark.unit
def test_the_report_page_leads_back_to_its_submission(site):
    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    browser, _ = sign_in("student", "ada")
    submission_id, _ = store.add_submission("ada", EXERCISE, "free", "r" * 8, exercise.submission_file, b"x = 1\n",
                                            state="graded")
    store.save_scorecard(submission_id, new_scorecard(exercise, "free", "local"))
    page = browser.get(f"/submissions/{submission_id}/report")
    assert page.status_code == 200
    assert f'<p class="back"><a href="/submissions/{submission_id}">' in page.text


@pytest.mark.unit
def test_each_request_is_logged_once_with_its_status_and_never_a_sign_in_token(site, caplog):
    import logging

    _, client, _, store, _ = site
    token = accounts.new_link(store, "instructor")
    with caplog.at_level(logging.INFO, logger="grader.web.requests"):
        client().get(f"/signin/{token}")
        client().get("/history")
    lines = [record.getMessage() for record in caplog.records if record.name == "grader.web.requests"]
    assert len(lines) == 2, lines
    assert re.fullmatch(r"request method=GET path=/signin/<token> status=200 ms=\d+", lines[0]), lines
    assert re.fullmatch(r"request method=GET path=/history status=401 ms=\d+", lines[1]), lines
    assert token not in caplog.text


@pytest.mark.unit
def test_a_grading_is_one_key_value_line(site):
    service, _, _, store, _ = site
    exercise = service.exercises[EXERCISE]
    submission_id, _ = store.add_submission("ada", EXERCISE, "free", "g" * 8, exercise.submission_file, b"x = 1\n",
                                            state="graded")
    from grader.service import jobs

    assert jobs.grading_line(store, submission_id, 1.234) == f"submission={submission_id} outcome=none seconds=1.23"
    store.save_scorecard(submission_id, dataclasses.replace(new_scorecard(exercise, "free", "local"), score=7,
                                                            max_score=10, status="graded"))
    assert jobs.grading_line(store, submission_id, 0.5) == \
        f"submission={submission_id} outcome=graded score=7/10 seconds=0.50"


@pytest.mark.unit
def test_signing_out_ends_the_session_and_needs_the_sessions_own_token(site):
    _, client, sign_in, _, _ = site
    browser, csrf = sign_in("student", "ada")
    _, instructor_csrf = sign_in("instructor")
    cookie = browser.cookies[COOKIE]
    for data in ({}, {"csrf": "forged"}, {"csrf": instructor_csrf}):
        refused = browser.post("/signout", data=data, follow_redirects=False)
        assert refused.status_code == 403 and "Form expired" in refused.text
    assert browser.get("/history").status_code == 200  # still signed in
    out = browser.post("/signout", data={"csrf": csrf}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/"
    assert COOKIE in out.headers["set-cookie"] and "max-age=0" in out.headers["set-cookie"].lower()
    stale = client()
    stale.cookies.set(COOKIE, cookie)
    assert stale.get("/history").status_code == 401, "the session outlived its sign-out"
    assert client().post("/signout", data={"csrf": csrf}).status_code == 401  # signed out: nobody to sign out


@pytest.mark.unit
def test_a_student_link_signs_in_again_and_again_with_a_cookie_scripts_cannot_read(site):
    _, client, _, store, _ = site
    link = f"/signin/{accounts.new_link(store, 'student', 'ada')}"
    for _ in range(2):
        pressed = press_sign_in(client(), link)
        assert pressed.status_code == 303 and pressed.headers["location"] == "/"
        cookie = pressed.headers["set-cookie"].lower()
        assert cookie.startswith(f"{COOKIE}=") and "httponly" in cookie and "samesite=lax" in cookie
        assert not re.search(r";\s*secure\b", cookie)  # an http address: a Secure cookie would never come back


def signed_in_as(browser: TestClient) -> str | None:
    """Whom the page header says is signed in (None: nobody)."""
    header = re.search(r'<header class="top">(.*?)</header>', browser.get("/").text, re.S)
    assert header
    found = re.search(r'<span class="muted">([^<]+?)(?: · <span class="pill">|</span>)', header.group(1))
    return found.group(1) if found else None


@pytest.mark.unit
def test_opening_a_students_link_signs_nobody_in_only_its_button_does(site):
    """A student who passes their link off as "the course link": whoever opens it (or is sent to it by a
    page of another site) is not signed in to the student's account. The page names whose link it is."""
    _, client, _, store, _ = site
    accounts.add_student(store, "mallory", "Mallory Mole")
    link = f"/signin/{accounts.new_link(store, 'student', 'mallory')}"
    browser = client()
    for method in ("GET", "HEAD", "GET"):
        opened = browser.request(method, link, follow_redirects=False)
        assert opened.status_code == 200 and COOKIE not in opened.cookies, method
        assert all(not c.startswith(f"{COOKIE}=") for c in opened.headers.get_list("set-cookie"))
    assert signed_in_as(browser) is None and browser.get("/history").status_code == 401
    page = browser.get(link).text
    assert "<h1>Sign in as mallory (Mallory Mole)</h1>" in page
    assert "personal link of <b>mallory (Mallory Mole)</b>" in page and "If this is not you, do not sign in" in page
    assert press_sign_in(browser, link).status_code == 303 and signed_in_as(browser) == "mallory"


@pytest.mark.unit
def test_the_sign_in_button_needs_the_token_its_own_page_set(site):
    """Login CSRF: a page of another site that posts the sign-in form from a classmate's browser has at
    best the token of a page its author opened, never the cookie of the classmate's browser."""
    _, client, _, store, _ = site
    link = f"/signin/{accounts.new_link(store, 'student', 'bob')}"
    attacker = client()
    own_page = attacker.get(link)
    form = SIGNIN_FORM.search(own_page.text)
    assert form and form.group(1) == link
    cookie = next(c for c in own_page.headers.get_list("set-cookie") if c.startswith(f"{SIGNIN_COOKIE}="))
    assert all(part in cookie.lower() for part in ("httponly", "samesite=strict", "path=/signin"))
    victim = client()
    for data in ({}, {"csrf": form.group(2)}, {"csrf": "forged"}, {"csrf": ""}):
        refused = victim.post(link, data=data, follow_redirects=False)
        assert refused.status_code == 403 and "Form expired" in refused.text, data
        assert COOKIE not in refused.cookies
    victim.cookies.set(SIGNIN_COOKIE, "short", path="/signin")  # a cookie the page never set, sent back as is
    assert victim.post(link, data={"csrf": "short"}).status_code == 403
    assert signed_in_as(victim) is None


@pytest.mark.unit
def test_a_sign_in_never_replaces_another_accounts_open_session_without_the_explicit_switch(site):
    _, client, sign_in, store, _ = site
    victim, csrf = sign_in("student", "ada")
    _, instructor_csrf = sign_in("instructor")
    ada_cookie = victim.cookies[COOKIE]
    link = f"/signin/{accounts.new_link(store, 'student', 'bob')}"
    page = victim.get(link)
    assert page.status_code == 200 and COOKIE not in page.cookies
    asked = re.search(r'<section class="card problem" id="switch"><h1>([^<]*)</h1>\s*<p>(.*?)</p>', page.text, re.S)
    assert asked and asked.group(1) == "You are signed in as ada"
    assert "signed in as <b>ada</b> now, and this link signs in as <b>bob</b>" in asked.group(2)
    assert 'id="signin-button"' not in page.text and 'href="/" id="stay"' in page.text
    token = SIGNIN_FORM.search(page.text).group(2)
    # The plain sign-in (an old page's button, a form sent from elsewhere) and a switch that does not carry
    # this session's own token (forged, another session's) go back to the question and change nothing.
    for data in ({"csrf": token}, {"csrf": token, "switch": "forged"}, {"csrf": token, "switch": instructor_csrf}):
        kept = victim.post(link, data=data, follow_redirects=False)
        assert kept.status_code == 303 and kept.headers["location"] == link, data
        assert COOKIE not in kept.cookies and victim.cookies[COOKIE] == ada_cookie
        assert signed_in_as(victim) == "ada"
    switched = victim.post(link, data={"csrf": token, "switch": csrf}, follow_redirects=False)
    assert switched.status_code == 303 and switched.headers["location"] == "/"
    assert signed_in_as(victim) == "bob"
    stale = client()
    stale.cookies.set(COOKIE, ada_cookie)
    assert stale.get("/history").status_code == 401, "ada's session outlived the switch away from it"


@pytest.mark.unit
def test_signing_in_again_to_the_account_signed_in_is_harmless(site):
    _, client, sign_in, store, _ = site
    browser = client()
    link = f"/signin/{accounts.new_link(store, 'student', 'ada')}"
    page = browser.get(link)
    token = SIGNIN_FORM.search(page.text).group(2)
    assert browser.post(link, data={"csrf": token}, follow_redirects=False).status_code == 303
    cookie = browser.cookies[COOKIE]
    for again in (browser.get(link, follow_redirects=False),  # the link opened again: straight to the pages
                  browser.post(link, data={"csrf": token}, follow_redirects=False)):  # its page's button again
        assert again.status_code == 303 and again.headers["location"] == "/"
        assert "set-cookie" not in again.headers and browser.cookies[COOKIE] == cookie
    assert signed_in_as(browser) == "ada"
    instructor, _ = sign_in("instructor")
    one_time = f"/signin/{accounts.new_link(store, 'instructor')}"
    assert instructor.get(one_time, follow_redirects=False).status_code == 303
    assert press_sign_in(client(), one_time).status_code == 303, "opening it signed in used the one-time link up"


@pytest.mark.unit
def test_behind_an_https_address_every_cookie_is_secure_and_every_link_uses_the_address(tmp_path):
    exercise = load_exercise(EXERCISE)
    store = Store(tmp_path / "grader.db")
    store.migrate()
    for address, secure in (("https://grader.example.edu", True), ("http://grader.example.edu:8000", False)):
        service = Service(store=store, dispatcher=Recorded(), exercises={exercise.slug: exercise}, base_url=address)
        browser = TestClient(create_app(service), base_url="https://testserver")
        link = f"/signin/{accounts.new_link(store, 'instructor')}"
        page = browser.get(link)
        pressed = browser.post(link, data={"csrf": SIGNIN_FORM.search(page.text).group(2)}, follow_redirects=False)
        csrf = csrf_of(browser.get("/instructor"))
        made = browser.post("/instructor/link", data={"csrf": csrf}, follow_redirects=False)
        cookies = {c.split("=", 1)[0]: c for r in (page, pressed, made) for c in r.headers.get_list("set-cookie")}
        assert set(cookies) == {SIGNIN_COOKIE, COOKIE, NEW_LINKS_COOKIE}
        for name, cookie in cookies.items():
            assert bool(re.search(r";\s*secure\b", cookie, re.I)) == secure, (address, name, cookie)
        shown = browser.get(made.headers["location"]).text
        assert re.search(rf'<td class="link">{re.escape(address)}/signin/[^<]+</td>', shown), shown[:3000]
        imported = browser.post("/instructor/roster", data={"csrf": csrf, "csv": f"id\nnew{int(secure)}\n"})
        assert re.search(rf'<td class="link">{re.escape(address)}/signin/[^<]+</td>', imported.text)
    store.close()


@pytest.mark.unit
def test_numbers_written_in_other_digits_are_refused_as_input_not_a_server_error(site):
    _, client, _, store, _ = site
    browser = client()  # a student who has not answered yet: the prediction's form is still open to her
    press_sign_in(browser, f"/signin/{accounts.new_link(store, 'student', 'bob')}")
    csrf = csrf_of(browser.get("/"))
    # "²" and "٣" are digits to str.isdigit, and int() takes the one and not the other.
    for choice in ("²", "٣", "-1", "1.0", ""):
        answer = browser.post(f"{PAGE}/prediction", data={"csrf": csrf, "choice": choice})
        assert answer.status_code == 400 and "Pick an answer" in answer.text, choice
    answer = browser.post(f"{PAGE}/prediction", data={"csrf": csrf, "choice": "9" * 5000})
    assert answer.status_code == 400 and "at most 3 are taken" in answer.text  # the field's own limit
    for number in ("²", "٣", "1²", "0x1"):
        for path in (f"/submissions/{number}", f"/submissions/{number}/report"):
            answer = browser.get(path)
            assert answer.status_code == 404 and "No such submission" in answer.text, path


@pytest.mark.unit
def test_starlettes_own_refusals_are_the_services_pages(site):
    _, _, sign_in, _, _ = site
    browser, csrf = sign_in("student", "ada")
    for answer, status, title in (
            (browser.get("/nowhere"), 404, "No such page"),
            (browser.put(PAGE), 405, "Not possible"),
            (browser.post(f"{PAGE}/submit", data={"csrf": csrf},
                          files=[("upload", (f"f{n}.py", b"x = 1\n")) for n in range(3)]), 400, "Too many files")):
        assert answer.status_code == status and title in answer.text, (status, answer.text[:200])
        assert answer.headers["content-type"].startswith("text/html") and "ada" in answer.text  # signed in
        assert "content-security-policy" in answer.headers


@pytest.mark.unit
def test_a_code_field_sent_as_a_file_is_refused_not_graded_as_its_description(site):
    _, _, sign_in, store, recorded = site
    browser, csrf = sign_in("student", "ada")
    sent = browser.post(f"{PAGE}/submit", data={"csrf": csrf}, files={"code": ("code.py", b"y = 2\n")})
    assert sent.status_code == 400 and "The field “code” is text, and a file was sent" in sent.text
    assert recorded.queued == [] and store.submissions(EXERCISE, "ada") == []


@pytest.mark.unit
def test_no_request_steers_a_path_on_disk(site):
    _, _, sign_in, _, _ = site
    browser, _ = sign_in("instructor")
    for path in ("/instructor/site/../../etc/passwd", "/instructor/site/%2e%2e/%2e%2e/etc/passwd",
                 "/instructor/site/students/../../grader.db", "/exercises/..%2f..%2fetc", "/exercises/../solutions"):
        answer = browser.get(path)
        assert answer.status_code == 404 and "root:" not in answer.text, path
    assert browser.get("/instructor/site/index.html").status_code == 200


@pytest.mark.unit
def test_a_new_link_and_a_revocation_ask_first_and_sign_the_student_out_once(site):
    _, client, sign_in, store, _ = site
    instructor, csrf = sign_in("instructor")
    link = f"/signin/{accounts.new_link(store, 'student', 'bob')}"
    session = client()
    assert press_sign_in(session, link).status_code == 303 and session.get("/history").status_code == 200
    dashboard = instructor.get("/instructor").text
    for action in ("link", "revoke"):
        assert f'href="/instructor/students/bob/{action}"' in dashboard
        assert f'action="/instructor/students/bob/{action}"' not in dashboard, f"one click ({action}) signs bob out"
        asked = instructor.get(f"/instructor/students/bob/{action}")
        assert asked.status_code == 200 and 'id="confirm"' in asked.text and "bob is signed out" in asked.text
        assert f'id="confirm-{action}"' in asked.text
        # A POST that is not the confirming button's (an old dashboard's form) is sent to that page.
        unasked = instructor.post(f"/instructor/students/bob/{action}", data={"csrf": csrf}, follow_redirects=False)
        assert unasked.status_code == 303 and unasked.headers["location"] == f"/instructor/students/bob/{action}"
        assert session.get("/history").status_code == 200, f"{action} signed bob out unasked"
    fresh = instructor.post("/instructor/students/bob/link", data={"csrf": csrf, "confirm": "bob"},
                            follow_redirects=False)
    assert fresh.status_code == 303 and "/signin/" not in fresh.headers["location"]
    assert session.get("/history").status_code == 401 and client().get(link).status_code == 403
    shown = instructor.get(fresh.headers["location"]).text
    assert "New sign-in link for bob: the old one no longer works, and bob is signed out." in shown
    new_link = re.search(r'class="link">http://testserver(/signin/[^<]+)<', shown).group(1)
    reloaded = instructor.get(fresh.headers["location"]).text  # a reload makes no other link, shows none
    assert new_link not in reloaded and "shown once" in reloaded
    assert [s.id for s in accounts.students(store) if s.link_active] == ["bob"]
    again = client()
    assert press_sign_in(again, new_link).status_code == 303 and again.get("/history").status_code == 200
    done = instructor.post("/instructor/students/bob/revoke", data={"csrf": csrf, "confirm": "bob"},
                           follow_redirects=False)
    assert done.status_code == 303
    assert "The sign-in link of bob is revoked" in instructor.get(done.headers["location"]).text
    assert again.get("/history").status_code == 401 and client().get(new_link).status_code == 403
    nothing = instructor.get("/instructor/students/bob/revoke").text
    assert "nothing to revoke" in nothing and 'id="confirm-revoke"' not in nothing
    # A new-links cookie made elsewhere shows no link: only links that still sign someone in are shown.
    instructor.cookies.set(NEW_LINKS_COOKIE, new_link.rsplit("/", 1)[1] + "." + "x" * 32, path="/instructor")
    assert 'class="link"' not in instructor.get("/instructor").text
    tier = instructor.post("/instructor/students/bob/tier", data={"csrf": csrf, "tier": "premium"},
                           follow_redirects=False)
    assert tier.status_code == 303 and "bob is now premium." in instructor.get(tier.headers["location"]).text


@pytest.mark.unit
def test_a_regrade_asks_first_and_then_says_which_scores_changed(tmp_path):
    exercise = load_exercise(EXERCISE)
    store = Store(tmp_path / "grader.db")
    store.migrate()
    dispatcher = Recorded()
    service = Service(store=store, dispatcher=dispatcher, exercises={exercise.slug: exercise},
                      base_url="http://testserver")
    client = TestClient(create_app(service))
    signed_in = press_sign_in(client, f"/signin/{accounts.new_link(store, 'instructor')}")
    client.cookies.set(COOKIE, signed_in.cookies[COOKIE])
    ids = {}
    for student, score in (("ada", 50), ("bob", 70)):
        ids[student], _ = store.add_submission(student, exercise.slug, "premium", student * 8,
                                               exercise.submission_file, b"pass\n", state="graded")
        store.save_scorecard(ids[student], dataclasses.replace(new_scorecard(exercise, "premium", "local"),
                                                               score=score, max_score=76, status="graded"))
    dashboard_page = client.get("/instructor").text
    assert f'href="/instructor/regrade/{exercise.slug}"' in dashboard_page
    assert f'action="/instructor/regrade/{exercise.slug}"' not in dashboard_page, "one click regrades the class"
    asked = client.get(f"/instructor/regrade/{exercise.slug}")
    assert asked.status_code == 200 and "2 submission(s) of 2 student(s)" in asked.text
    assert "0 score(s) changed, 0 unchanged, 2 graded once only" in asked.text
    assert dispatcher.queued == [], "showing the page queued a regrade"
    csrf = re.search(r'name="csrf" value="([^"]+)"', asked.text).group(1)  # type: ignore[union-attr]
    done = client.post(f"/instructor/regrade/{exercise.slug}", data={"csrf": csrf}, follow_redirects=False)
    assert done.status_code == 303 and sorted(dispatcher.queued) == sorted(ids.values())
    following = client.get(done.headers["location"])
    assert "2 submission(s) queued for regrading" in following.text and "2 waiting to be graded" in following.text
    for student, score in (("ada", 52), ("bob", 70)):  # the regrade's gradings end
        store.save_scorecard(ids[student], dataclasses.replace(new_scorecard(exercise, "premium", "local"),
                                                               score=score, max_score=76, status="graded"))
        with store.transaction() as db:
            from grader.db import schema
            db.execute(schema.submissions.update().where(schema.submissions.c.id == ids[student])
                       .values(state="graded"))
    accounts.add_student(store, "ada", "Ada Lovelace", "premium")
    summary = client.get(f"/instructor/regrade/{exercise.slug}").text
    assert "1 score(s) changed, 1 unchanged" in summary
    row = re.search(r"<td><a href=\"/instructor/students/ada\">ada</a> <span class=\"muted\">Ada Lovelace</span></td>"
                    r".*?</tr>", summary, re.S)
    assert row and "50/76" in row.group() and "52/76" in row.group(), summary
    assert "/instructor/students/bob" not in summary
    store.close()


@pytest.mark.unit
def test_the_prediction_comes_before_what_gives_its_answer_away(site):
    """The statement's order of a step and the visible tests say what runs first: they open once the
    student has answered, as the exercise's [prediction] hides says. Instructors see the whole page."""
    _, client, sign_in, store, _ = site
    answer_words = "64 running decodes"  # the visible test's own words (its docstring)
    browser = client()
    press_sign_in(browser, f"/signin/{accounts.new_link(store, 'student', 'bob')}")
    page = browser.get("/")
    before = browser.get(PAGE).text
    assert 'id="prediction"' in before and 'id="held-back"' in before
    assert 'id="statement"' not in before and 'id="visible-tests"' not in before and answer_words not in before
    browser.post(f"{PAGE}/prediction", data={"csrf": csrf_of(page), "choice": "0"})
    after = browser.get(PAGE).text
    assert 'id="statement"' in after and 'id="visible-tests"' in after and 'id="held-back"' not in after
    instructor, _ = sign_in("instructor")
    assert 'id="visible-tests"' in instructor.get(PAGE).text


@pytest.mark.unit
def test_instructors_see_the_answers_counted_per_choice_and_each_students_name_tier_and_answer(site):
    service, _, sign_in, store, _ = site
    accounts.import_roster(store, "id,name,tier\nada,Ada Lovelace,premium\nbob,Bob Byte,free\n")
    sign_in("student", "ada")  # answers choice 3, the right one
    question = service.exercises[EXERCISE].prediction
    accounts.record_prediction(store, "bob", EXERCISE, question.choices[0], False)
    instructor, _ = sign_in("instructor")
    tally = re.search(rf'<details class="predictions" id="predictions-{EXERCISE}">(.*?)</details>',
                      instructor.get("/instructor").text, re.S)
    assert tally and "2 answer(s), 1 right" in tally.group(1)
    counts = re.findall(r"<tr><td>(.*?)</td><td class=\"num\">(\d+)</td></tr>", tally.group(1))
    assert [int(n) for _, n in counts] == [1, 0, 1, 0] and "(the answer)" in counts[2][0]
    history = instructor.get("/instructor/students/ada").text
    assert "Ada Lovelace · premium tier" in history
    assert re.search(r"<b>The 64 decodes \(one token each\) and the first 448 tokens of the prompt</b> — "
                     r'<span class="good">right</span>', history), history
    assert "not right" in instructor.get("/instructor/students/bob").text


@pytest.mark.unit
def test_gradebooks_name_each_student_and_tier_and_a_pseudonymous_site_names_nobody(site):
    from grader.course.publish import build_site

    _, _, sign_in, store, _ = site
    accounts.import_roster(store, "id,name,tier\nada,Ada Lovelace,premium\n")
    exercise = load_exercise(EXERCISE)
    submission_id, _ = store.add_submission("ada", EXERCISE, "premium", "a" * 64, exercise.submission_file,
                                            b"pass\n", state="graded")
    store.save_scorecard(submission_id, new_scorecard(exercise, "premium", "local"))
    instructor, _ = sign_in("instructor")
    rows = list(csv.DictReader(io.StringIO(instructor.get(f"/instructor/site/gradebook-{EXERCISE}.csv").text)))
    assert [(r["student"], r["name"], r["tier"]) for r in rows] == [("ada", "Ada Lovelace", "premium")]
    hidden = build_site(store, pseudonymous=True)
    assert "Lovelace" not in "".join(hidden.values())
    rows = list(csv.DictReader(io.StringIO(hidden[f"gradebook-{EXERCISE}.csv"])))
    assert rows[0]["student"].startswith("student-") and rows[0]["name"] == "" and rows[0]["tier"] == "premium"


@pytest.mark.unit
def test_a_queued_submission_says_when_no_grader_takes_work_and_why(site):
    """From the store: something has waited over two minutes, nothing is being graded and nothing was
    graded meanwhile. The queue's own answer says why (no worker, Redis away) where it can tell."""
    from grader.db import schema
    from grader.service import jobs

    _, _, sign_in, store, recorded = site
    browser, csrf = sign_in("student", "ada")
    done = browser.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x = 1\n"}, follow_redirects=False)
    page = done.headers["location"]
    assert 'id="stalled"' not in browser.get(page).text, "a queue that just took the submission is stalled"
    assert jobs.stalled_for(store) is None
    with store.transaction() as db:  # three minutes later, with no grader about
        db.execute(schema.submissions.update().values(queued_at=schema.submissions.c.queued_at - 180))
    assert 179 < (jobs.stalled_for(store) or 0) < 200
    stalled = re.search(r'<p class="bad" id="stalled" role="status">([^<]*)</p>', browser.get(page).text)
    assert stalled and stalled.group(1).startswith("No grader has taken work for 3 minutes.")
    assert "you need not submit again" in stalled.group(1)
    recorded.why = ["No `grader worker` is listening on the queue."]
    assert "3 minutes. No `grader worker` is listening on the queue. Your submission is kept" in browser.get(page).text
    with store.transaction() as db:  # waiting a moment only, but the queue knows no worker listens: said at once
        db.execute(schema.submissions.update().values(queued_at=time.time()))
    assert "Grading is held up. No `grader worker` is listening on the queue." in browser.get(page).text
    with store.transaction() as db:  # a grader takes it: the queue moves again
        db.execute(schema.submissions.update().values(state="grading", lease_until=schema.submissions.c.queued_at + 1e6))
    assert jobs.stalled_for(store) is None


@pytest.mark.unit
def test_the_dashboard_says_what_keeps_the_graders_from_taking_work(site):
    _, _, sign_in, _, recorded = site
    instructor, _ = sign_in("instructor")
    assert 'id="grading-problems"' not in instructor.get("/instructor").text, "a problem shown while all is well"
    recorded.why = ["No `grader worker` is listening on the queue.",
                    "Submission 3 lost its grader and waits to be graded again (after 3 lost gradings a submission "
                    "gets an error scorecard)."]
    shown = re.search(r'<ul class="bad" id="grading-problems" role="status">(.*?)</ul>',
                      instructor.get("/instructor").text)
    assert shown and re.findall(r"<li>([^<]*)</li>", shown.group(1)) == recorded.why


@pytest.mark.unit
def test_a_fault_of_the_service_is_its_own_500_page_not_a_bare_text(site, monkeypatch):
    from grader.web import exercise_page

    _, _, sign_in, _, _ = site
    browser, _ = sign_in("student", "ada")

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a page")

    monkeypatch.setattr(exercise_page, "deadline_view", broken)
    browser = TestClient(browser.app, raise_server_exceptions=False, cookies=browser.cookies)
    page = browser.get(PAGE)
    assert page.status_code == 500 and page.headers["content-type"].startswith("text/html")
    assert "Something went wrong here" in page.text and "a bug in a page" not in page.text


@pytest.mark.unit
def test_a_submission_page_says_the_likely_cause_and_the_dashboard_counts_students_per_misconception(site):
    from grader.core.scorecard import Diagnosis, TestResult

    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    late = Diagnosis("13_first_token_late", "emits a request's first token a step late", 0.9)
    skip = Diagnosis("03_skip_blocked_head", "skips a waiting request that does not fit", 0.8)
    pages = {}
    for student, found, score in (("ada", [late], 5), ("bob", [late, skip], 5), ("cy", [skip], 10)):
        if student == "cy":
            accounts.add_student(store, student)
        submission_id, _ = store.add_submission(student, EXERCISE, "free", student * 8, exercise.submission_file,
                                                f"# {student}\n".encode(), state="graded")
        failed = TestResult("v::a", "test_a", "visible", "failed" if score < 10 else "passed", 0, 5, "step 3")
        card = dataclasses.replace(new_scorecard(exercise, "free", "local"), score=score, max_score=10,
                                   tests=[failed], diagnosis=found)
        store.save_scorecard(submission_id, card)
        pages[student] = submission_id
    browser, _ = sign_in("student", "ada")
    page = browser.get(f"/submissions/{pages['ada']}").text
    told = re.search(r'id="diagnosis">(.*?)</p>', page)
    assert told and "Your program behaves like one that emits a request&#39;s first token a step late." in told.group(1)
    instructor, _ = sign_in("instructor")
    assert 'id="diagnosis"' not in instructor.get(f"/submissions/{pages['cy']}").text  # full marks: none
    dashboard = instructor.get("/instructor").text
    table = re.search(rf'id="misconceptions-{EXERCISE}">(.*?)</details>', dashboard, re.S)
    assert table, "the dashboard counts no misconception"
    rows = re.findall(r"<tr><td>(.*?) <span[^>]*>\((\w+)\)</span></td><td class=\"num\">(\d+)</td></tr>", table.group(1))
    assert [(mutant, int(n)) for _, mutant, n in rows] == [("13_first_token_late", 2), ("03_skip_blocked_head", 1)]


def test_serve_with_an_https_base_url_prints_and_shows_its_links_there_and_sets_secure_cookies(tmp_path, monkeypatch):
    """`grader serve --base-url https://...` behind a proxy that ends TLS: the instructor's link it prints is
    the public one, and the application it serves makes Secure cookies. uvicorn and the graders are left
    out: the application is driven in-process while `serve` would be serving it."""
    import uvicorn

    import grader.service.dispatch
    import grader.web.serve
    from grader.web.serve import ServeOptions, serve

    class Graders(Recorded):
        def __init__(self, *args: object) -> None:
            super().__init__()

        def start(self) -> None:
            pass

        def stop(self) -> None:
            pass

    printed = io.StringIO()
    seen: dict[str, object] = {}

    def run(server: uvicorn.Server, sockets: list) -> None:
        link = re.search(r"instructor sign-in \(works once\): https://grader\.example\.edu(/signin/\S+)$",
                         printed.getvalue(), re.M)
        assert link, printed.getvalue()
        browser = TestClient(server.config.app, base_url="https://testserver")
        page = browser.get(link.group(1))
        pressed = browser.post(link.group(1), data={"csrf": SIGNIN_FORM.search(page.text).group(2)},
                               follow_redirects=False)
        seen["cookies"] = page.headers.get_list("set-cookie") + pressed.headers.get_list("set-cookie")
        seen["dashboard"] = browser.get("/instructor").status_code

    monkeypatch.setattr(grader.service.dispatch, "ThreadDispatcher", Graders)
    monkeypatch.setattr(grader.web.serve, "choose_backend", lambda *args, **kwargs: SimpleNamespace(name="no"))
    monkeypatch.setattr(uvicorn.Server, "run", run)
    serve(ServeOptions(port=0, db=str(tmp_path / "class.db"), base_url="https://grader.example.edu"), out=printed)
    assert re.search(r"at http://127\.0\.0\.1:\d+/ \(public address https://grader\.example\.edu/\)", printed.getvalue())
    assert seen["dashboard"] == 200
    cookies = seen["cookies"]
    assert isinstance(cookies, list) and len(cookies) == 2
    assert all(re.search(r";\s*secure\b", cookie, re.I) for cookie in cookies), cookies


@pytest.mark.unit
def test_a_rejected_file_keeps_the_graded_standing_and_does_not_use_up_the_interval(site):
    """ada's graded 5/10, then a file with a syntax error: the file is kept and shown to her with its reason,
    her fix is taken at once (the rejected file started no wait), and the gradebook, the overview and
    the dashboard's misconceptions still count her graded submission."""
    from datetime import datetime, timedelta, timezone

    from grader.core.scorecard import Diagnosis

    service, _, sign_in, store, recorded = site
    exercise = service.exercises[EXERCISE]
    now = [datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)]
    service.clock = lambda: now[0]
    browser, csrf = sign_in("student", "ada")

    def send(code: str):
        return browser.post(f"{PAGE}/submit", data={"csrf": csrf, "code": code}, follow_redirects=False)

    def graded(location: str, **fields) -> int:
        submission_id = int(location.rsplit("/", 1)[1])
        store.save_scorecard(submission_id, dataclasses.replace(new_scorecard(exercise, "free", "local"), **fields))
        return submission_id

    late = Diagnosis("13_first_token_late", "emits a request's first token a step late", 0.9)
    first = send("x = 1\n")
    assert first.status_code == 303
    graded(first.headers["location"], score=5, max_score=10, diagnosis=[late])
    now[0] += timedelta(seconds=61)
    broken = send("def schedule(self:\n")
    assert broken.status_code == 303, broken.text[:300]
    rejected = graded(broken.headers["location"], status="rejected", score=0,
                      reason="syntax error at line 1: '(' was never closed")
    page = browser.get(f"/submissions/{rejected}").text
    note = re.search(r'<p class="bad" id="rejected">([^<]*)</p>', page)
    assert note and "syntax error at line 1" in note.group(1) and "counts for nothing" in note.group(1)
    assert "syntax error at line 1" in browser.get(f"/submissions/{rejected}/report").text
    now[0] += timedelta(seconds=5)
    fixed = send("x = 2\n")  # 5 s after the rejected file, 66 s after the graded one
    assert fixed.status_code == 303, fixed.text[:300]
    assert len(recorded.queued) == 3

    instructor, _ = sign_in("instructor")
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(
        instructor.get(f"/instructor/site/gradebook-{EXERCISE}.csv").text))}
    assert (rows["ada"]["score"], rows["ada"]["status"]) == ("5", "graded")  # the fix is not graded yet
    for policy in ("best", "on-time"):
        rows = {r["student"]: r for r in csv.DictReader(io.StringIO(
            instructor.get(f"/instructor/site/{policy}/gradebook-{EXERCISE}.csv").text))}
        assert (rows["ada"]["score"], rows["ada"]["status"]) == ("5", "graded"), policy
    overview = " ".join(instructor.get("/instructor/site/index.html").text.split())
    assert "rejected file" not in overview
    table = re.search(rf'id="misconceptions-{EXERCISE}">(.*?)</details>', instructor.get("/instructor").text, re.S)
    assert table and "13_first_token_late" in table.group(1)


@pytest.mark.unit
def test_a_body_over_the_limit_is_the_services_page_with_the_code_typed_kept(site):
    """A file too large to upload beside the code in the editor: the service's own page (413) says the
    limit, how to submit a smaller file, and keeps the editor's code; nothing is stored."""
    _, _, sign_in, store, recorded = site
    browser, csrf = sign_in("student", "ada")
    code = "x = 1  # kept </textarea><b>\n"
    refused = browser.post(f"{PAGE}/submit", data={"csrf": csrf, "code": code},
                           files={"upload": ("scheduler.py", b"#" * (100 * 1024))})
    assert refused.status_code == 413 and refused.headers["content-type"].startswith("text/html")
    assert "content-security-policy" in refused.headers and "ada" in refused.text  # her own page, signed in
    problem = re.search(r'<section class="card problem" id="problem"><p>([^<]*)</p>', refused.text)
    assert problem, refused.text[:2000]
    assert "64 KiB" in problem.group(1) and "256 KiB" in problem.group(1) and "kept in the editor" in problem.group(1)
    editor = re.search(r'<textarea id="code"[^>]*>(.*?)</textarea>', refused.text, re.S)
    assert editor and editor.group(1) == "x = 1  # kept &lt;/textarea&gt;&lt;b&gt;\n"
    assert recorded.queued == [] and store.submissions(EXERCISE, "ada") == []


@pytest.mark.unit
def test_code_too_large_to_keep_gets_a_page_that_says_what_happened_and_leads_back(site):
    """Code past the limit cannot be read whole: the page says so, how to submit a smaller file, and links
    back to the exercise, and never shows a part of the code as if it were all of it."""
    _, client, sign_in, _, recorded = site
    browser, csrf = sign_in("student", "ada")
    code = "x = 1\n" + "# padding\n" * (10 * 1024) + "y = 'the end'\n"
    for answer in (browser.post(f"{PAGE}/submit", data={"csrf": csrf, "code": code}),
                   browser.post(f"{PAGE}/submit", data={"csrf": csrf}, files={"code": (None, code.encode())})):
        assert answer.status_code == 413 and answer.headers["content-type"].startswith("text/html")
        text = " ".join(answer.text.split())
        assert "64 KiB" in text and "256 KiB" in text and "Back" in text
        assert f'href="{PAGE}#editor"' in answer.text and "# padding" not in answer.text
    # Signed out, or with another session's token: the page says the limit and echoes nothing sent.
    _, other = sign_in("student", "bob")
    for sender, token in ((client(), csrf), (browser, other)):
        answer = sender.post(f"{PAGE}/submit", data={"csrf": token, "code": "z = 1  # mine\n"},
                             files={"upload": ("scheduler.py", b"#" * (100 * 1024))})
        assert answer.status_code == 413 and "64 KiB" in answer.text and "z = 1" not in answer.text
    assert recorded.queued == []


@pytest.mark.unit
def test_a_regrade_counts_a_new_maximum_as_a_change_and_says_when_it_is_done(site):
    """0/10 then 0/15 is a changed score (the suites gained points); once nothing waits, the page says the
    regrade is done and no longer offers its button as if work were pending."""
    from grader.service import jobs

    service, _, sign_in, store, recorded = site
    exercise = service.exercises[EXERCISE]
    ids = []
    for student, maximum in (("ada", 15), ("bob", 10)):
        submission_id, _ = store.add_submission(student, EXERCISE, "free", student * 8, exercise.submission_file,
                                                f"# {student}\n".encode(), state="graded")
        store.save_scorecard(submission_id, dataclasses.replace(new_scorecard(exercise, "free", "local"),
                                                                score=0, max_score=10))
        ids.append((submission_id, maximum))
    instructor, csrf = sign_in("instructor")
    posted = instructor.post(f"/instructor/regrade/{EXERCISE}", data={"csrf": csrf}, follow_redirects=False)
    assert posted.status_code == 303 and posted.headers["location"].endswith("?queued=2")
    assert sorted(recorded.queued) == sorted(i for i, _ in ids)
    waiting = instructor.get(posted.headers["location"]).text
    assert "2 submission(s) queued for regrading" in waiting and "2 waiting to be graded" in waiting
    button = re.search(r'<button id="confirm-regrade"([^>]*)>([^<]*)</button>', waiting)
    assert button and "disabled" in button.group(1) and "still in the queue" in button.group(2)
    for submission_id, maximum in ids:  # the graders take them: ada's suites now give 15 points, bob's 10
        store.save_scorecard(submission_id, dataclasses.replace(new_scorecard(exercise, "free", "local"),
                                                                score=0, max_score=maximum))
    assert jobs.status(store, ids[0][0]).state == "graded"
    done = instructor.get(posted.headers["location"]).text
    tally = re.search(r"(\d+) score\(s\) changed, (\d+) unchanged", done)
    assert tally and tally.groups() == ("1", "1"), done
    assert re.search(r"<td>0/10</td><td[^>]*>0/15</td>", done)
    notice = re.search(r'id="notice"><p>([^<]*)</p>', done)
    assert notice and notice.group(1).startswith("The regrade is done") and "queued" not in notice.group(1).split(":")[0]
    assert "waiting" not in notice.group(1)
    button = re.search(r'<button id="confirm-regrade"([^>]*)>([^<]*)</button>', done)
    assert button and "disabled" not in button.group(1) and "again" in button.group(2)


@pytest.mark.unit
def test_a_refused_roster_names_every_bad_line_on_the_dashboard(site):
    _, _, sign_in, store, _ = site
    browser, csrf = sign_in("instructor")
    pasted = "id,tier\neve,free\nfay,gold\n../x,free\neve,premium\n"
    refused = browser.post("/instructor/roster", data={"csrf": csrf, "csv": pasted})
    assert refused.status_code == 400
    listed = re.search(r'<ul id="roster-problems">(.*?)</ul>', refused.text, re.S)
    assert listed, refused.text[:3000]
    lines = re.findall(r"<li>roster line (\d+): ", listed.group(1))
    assert lines == ["3", "4", "5"]
    assert "3 problems" in refused.text and "fay" not in {s.id for s in accounts.students(store)}


@pytest.mark.unit
def test_the_overview_names_each_student_with_their_id_and_leads_back_to_the_dashboard(site, tmp_path):
    from grader.course.publish import publish

    _, _, sign_in, store, _ = site
    accounts.import_roster(store, "id,name\nada,Ada Lovelace\nbob,\n")
    exercise = load_exercise(EXERCISE)
    for student in ("ada", "bob"):
        submission_id, _ = store.add_submission(student, EXERCISE, "free", student * 8, exercise.submission_file,
                                                f"# {student}\n".encode(), state="graded")
        store.save_scorecard(submission_id, new_scorecard(exercise, "free", "local"))
    instructor, _ = sign_in("instructor")
    for folder in ("", "best/", "on-time/"):
        overview = instructor.get(f"/instructor/site/{folder}index.html").text
        assert '<a href="/instructor">← Dashboard</a>' in overview, folder
        assert '<a href="students/ada.html">Ada Lovelace <span class="muted">(ada)</span></a>' in overview
        assert '<a href="students/bob.html">bob</a>' in overview  # no name on the roster: the id alone
        page = instructor.get(f"/instructor/site/{folder}students/ada.html").text
        assert '<a href="/instructor">← Dashboard</a>' in page and "<h2>Ada Lovelace (ada)</h2>" in page
    published = publish(store, tmp_path / "site")  # a site read from disk has no dashboard to go back to
    assert all("/instructor" not in path.read_text() for path in published.pages)
    assert "Ada Lovelace" in (tmp_path / "site" / "index.html").read_text()


@pytest.mark.unit
def test_the_overview_and_its_gradebook_tell_timeouts_from_wrong_answers(site):
    """ada's answers are wrong, bob's program ran out of time on a test, cy's whole run was stopped at the
    exercise's time limit: the gradebook counts failed and timed-out tests apart, and the overview says
    which is which rather than showing each as a plain lost point."""
    from grader.core.grading import TIMED_OUT
    from grader.core.scorecard import TestResult

    service, _, sign_in, store, _ = site
    exercise = service.exercises[EXERCISE]
    accounts.add_student(store, "cy")
    results = {"ada": ("graded", "", ["failed", "failed", "passed"]),
               "bob": ("graded", "", ["timeout", "passed", "passed"]),
               "cy": ("error", f"{TIMED_OUT} within the exercise's 160 s", [])}
    for student, (status, reason, outcomes) in results.items():
        submission_id, _ = store.add_submission(student, EXERCISE, "free", student * 8, exercise.submission_file,
                                                f"# {student}\n".encode(), state="graded")
        tests = [TestResult(f"v::t{i}", f"test_{i}", "visible", outcome, 5 if outcome == "passed" else 0, 5)
                 for i, outcome in enumerate(outcomes)]
        card = dataclasses.replace(new_scorecard(exercise, "free", "local"), status=status, reason=reason,
                                   tests=tests, score=sum(t.score for t in tests), max_score=15)
        store.save_scorecard(submission_id, card)
    instructor, _ = sign_in("instructor")
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(
        instructor.get(f"/instructor/site/gradebook-{EXERCISE}.csv").text))}
    assert {s: (r["tests_failed"], r["tests_timed_out"], r["timed_out"]) for s, r in rows.items()} == {
        "ada": ("2", "0", "False"), "bob": ("0", "1", "False"), "cy": ("0", "0", "True")}
    overview = instructor.get("/instructor/site/index.html").text
    result = {name: " ".join(cell.split()) for name, cell in re.findall(
        r'<a href="students/(\w+)\.html">.*?</a></td>.*?<td class="result">(.*?)</td>', overview, re.S)}
    assert "2 failed" in result["ada"] and "timed out" not in result["ada"], result
    assert "1 timed out" in result["bob"] and "failed" not in result["bob"], result
    assert 's-timed-out">timed out</span>' in result["cy"] and "error" not in result["cy"], result
    rates = re.search(r"<tr>\s*<td><span class=\"test-name\">test_0</span>.*?</tr>", overview, re.S)
    assert rates and "1 timed out" in rates.group(0)


# While the store is away: a signed-in student's submission is kept in the spool (grader.service.spool),
# acknowledged as kept, and stored once when the store is back.

@pytest.fixture
def outage(site, tmp_path):
    """The site with a spool, and a switch that takes its store away (an engine the driver cannot open,
    as in a PostgreSQL outage) and brings it back."""
    from sqlalchemy import create_engine

    from grader.service.spool import Spool

    service, client, sign_in, store, recorded = site
    service.spool = Spool(tmp_path / "spool")
    real = store.engine
    gone = create_engine(f"sqlite:///{tmp_path}/gone/grader.db")

    def away(is_away: bool) -> None:
        store.engine = gone if is_away else real

    yield SimpleNamespace(service=service, client=client, sign_in=sign_in, store=store, recorded=recorded,
                          spool=service.spool, away=away)
    store.engine = real
    gone.dispose()


@pytest.mark.unit
def test_a_submission_while_the_store_is_away_is_kept_on_disk_and_said_so(outage):
    import base64
    import hashlib
    import json
    import stat
    from datetime import datetime

    ada, csrf = outage.sign_in("student", "ada")  # her session is verified, so this process knows it
    outage.away(True)
    kept = ada.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x = 1\r\n# kept\r\n"}, follow_redirects=False)
    assert kept.status_code == 202, kept.text[:500]
    assert "kept on this server" in kept.text and "you need not submit again" in kept.text
    [path] = outage.spool.files()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    raw = json.loads(path.read_text())
    content = base64.b64decode(raw["content"])
    assert content == b"x = 1\n# kept\n" and raw["sha256"] == hashlib.sha256(content).hexdigest()
    assert (raw["student"], raw["exercise"], raw["tier"]) == ("ada", EXERCISE, "free")
    assert datetime.fromisoformat(raw["arrived"]).tzinfo is not None
    # Every other page still says the service is back in a moment, without promising what is not so.
    home = ada.get("/")
    assert home.status_code == 503 and "Back in a moment" in home.text and "Nothing you sent is lost" not in home.text
    # The checks that need no store hold: a form of another site, an empty submission, a closed exercise.
    assert ada.post(f"{PAGE}/submit", data={"csrf": "forged", "code": "x = 2\n"}).status_code == 403
    empty = ada.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "  \n"})
    assert empty.status_code == 400 and "empty" in empty.text
    assert len(outage.spool.files()) == 1 and outage.recorded.queued == []


@pytest.mark.unit
def test_while_the_store_is_away_a_session_this_process_has_not_verified_recently_is_refused_with_its_code(outage):
    bob, csrf = outage.sign_in("student", "bob")
    outage.service.sessions.forget_student("bob")  # as if bob had opened no page here in the last minutes
    outage.away(True)
    refused = bob.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "y = 2  # bob's\n"})
    assert refused.status_code == 503 and refused.headers["retry-after"] == "30"
    assert "could not be received" in refused.text and "Nothing was kept" in refused.text
    assert "y = 2  # bob&#39;s" in refused.text  # the code sent, to copy
    assert outage.spool.files() == []


@pytest.mark.unit
def test_the_spool_keeps_a_bounded_number_per_student_and_says_when_it_is_full(outage):
    outage.spool.max_per_student = 3
    ada, csrf = outage.sign_in("student", "ada")
    bob, bob_csrf = outage.sign_in("student", "bob")
    outage.away(True)
    for n in range(3):
        assert ada.post(f"{PAGE}/submit", data={"csrf": csrf, "code": f"x = {n}\n"}).status_code == 202
    over = ada.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x = 'the fourth'\n"})
    assert over.status_code == 503 and "the most it keeps for one student" in over.text
    assert "the fourth" in over.text  # the code, to copy
    assert bob.post(f"{PAGE}/submit", data={"csrf": bob_csrf, "code": "y = 1\n"}).status_code == 202
    assert len(outage.spool.files()) == 4


@pytest.mark.unit
def test_a_closed_exercise_is_closed_by_the_last_deadlines_known_while_the_store_is_away(outage):
    from datetime import datetime, timezone

    from grader.course.deadlines import Deadlines

    ada, csrf = outage.sign_in("student", "ada")
    outage.away(True)
    outage.service.known_deadlines = Deadlines(closes={EXERCISE: datetime(2020, 1, 1, tzinfo=timezone.utc)})
    closed = ada.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x = 'too late'\n"})
    assert closed.status_code == 403 and "closed" in closed.text and "too late" in closed.text
    assert outage.spool.files() == []


@pytest.mark.unit
def test_the_drainer_stores_each_kept_submission_once_with_its_arrival_time_and_queues_it(outage):
    import shutil

    from grader.service.spool import Drainer, Spooled

    ada, csrf = outage.sign_in("student", "ada")
    bob, bob_csrf = outage.sign_in("student", "bob")
    instructor, _ = outage.sign_in("instructor")
    outage.away(True)
    for browser, token, code in ((ada, csrf, "x = 1\n"), (bob, bob_csrf, "y = 1\n"), (ada, csrf, "x = 2\n")):
        assert browser.post(f"{PAGE}/submit", data={"csrf": token, "code": code}).status_code == 202
    arrived = {(e.student, e.content): e.arrived for e in map(Spooled.from_file, outage.spool.files())}
    outage.away(False)
    waiting = instructor.get("/instructor")
    assert "3 submission(s) received during a database outage are waiting to be stored" in waiting.text
    drainer = Drainer(outage.spool, outage.store, outage.recorded.enqueue, every_s=0.05)
    drainer.start()
    try:
        deadline = time.monotonic() + 10
        while outage.spool.files() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        drainer.stop()
    assert outage.spool.files() == []
    stored = outage.store.submissions(EXERCISE)
    assert len(stored) == 3 and sorted(outage.recorded.queued) == sorted(s.id for s in stored)
    for sub in stored:
        content = outage.store.content(sub.id)
        assert sub.submitted_at == arrived[(sub.student, content)].isoformat(timespec="seconds"), sub
        assert sub.state == "queued"
    assert "waiting to be stored" not in instructor.get("/instructor").text
    # A file drained again (a crash between storing it and deleting it) finds its submission stored.
    outage.away(True)
    assert ada.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x = 1\n"}).status_code == 202
    [path] = outage.spool.files()
    shutil.copy(path, path.with_name("z-" + path.name))
    outage.away(False)
    assert outage.spool.drain(outage.store, outage.recorded.enqueue) == 2
    assert len(outage.store.submissions(EXERCISE)) == 3 and len(outage.recorded.queued) == 3
    assert outage.spool.files() == []
