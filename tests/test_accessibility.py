"""WCAG 2.1 AA on every page a student, a TA or an instructor sees, checked with axe-core in Chromium
(tests/axe.py): each page of the service as its reader gets it, the HTML report of each kind of
scorecard, and the published site. axe must find nothing, in the light and the dark colour scheme.

A new page is one line in `SERVICE_PAGES` (a reader and a path; the path's {fields} are filled from the
course below), `REPORTS` (a golden scorecard) or the site's list, which follows `publish` by itself. Pages
no URL opens alone (an LMS's launch, a body over the size cap, the store away) are made in process and
shown with `page.set_content`.
What no rule sees is listed in docs/accessibility.md, and the keyboard walk is tests/test_keyboard.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grader.course.publish import publish
from grader.course.store import Store
from grader.report import render_html
from tests import golden
from tests.axe import check_page
from tests.helpers import EXERCISE, REFERENCE, STUB, exercise_copy, mutant_file
from tests.lti_platform import INSTRUCTOR
from tests.service import import_roster, local_server, signed_in, wait_graded
from tests.test_lti import grade, launch, lti  # noqa: F401  (the LTI service in process, its launches)

pytestmark = pytest.mark.slow
MUTANT = mutant_file("03_skip_blocked_head")


@dataclass(frozen=True)
class Visit:
    """A page of the service as `who` opens it ("nobody", "student", "newcomer": a student who has not
    answered the prediction yet, "ta": a teaching assistant, "instructor"), and the HTTP status it answers
    with."""

    who: str
    path: str
    status: int = 200

    def __str__(self) -> str:
        return f"{self.who}:{self.path}"


# Every page of the service, one line each. Fields: {exercise}, {student} (the student who submitted),
# {failing} and {passing} (their graded submissions), {link} (the student's sign-in path), {resolved} and
# {open} (the student's grade inquiries about {failing}: one answered and resolved, one answered and added
# to, still open).
SERVICE_PAGES = [
    Visit("nobody", "/", 401),
    Visit("nobody", "{link}"),
    Visit("newcomer", "{link}"),  # signed in as someone else: the page asks before switching
    Visit("nobody", "/no-such-page", 404),
    Visit("student", "/"),
    Visit("student", "/history"),
    Visit("newcomer", "/exercises/{exercise}"),  # the prediction before the editor
    Visit("student", "/exercises/{exercise}"),  # the editor open, the student's submissions
    Visit("student", "/exercises/{exercise}/solution"),
    Visit("student", "/submissions/{failing}"),
    Visit("student", "/submissions/{failing}/report"),
    Visit("student", "/submissions/{passing}"),
    Visit("student", "/submissions/{passing}/report"),
    Visit("instructor", "/instructor"),
    Visit("student", "/submissions/{failing}/inquiry"),  # asking about a grade, with the inquiries asked
    Visit("student", "/inquiries"),
    Visit("student", "/inquiries/{resolved}"),
    Visit("student", "/inquiries/{open}"),
    Visit("ta", "/staff"),
    Visit("ta", "/staff/students/{student}"),
    Visit("ta", "/inquiries"),
    Visit("ta", "/inquiries?state=all"),
    Visit("ta", "/inquiries/{resolved}"),
    Visit("ta", "/inquiries/{open}?done=answered"),  # with the notice of what was done
    Visit("ta", "/exercises/{exercise}"),
    Visit("ta", "/submissions/{failing}"),
    Visit("ta", "/submissions/{failing}/report"),
    Visit("instructor", "/inquiries"),  # the queue and the course's inquiry settings
    Visit("instructor", "/inquiries?state=resolved"),
    Visit("instructor", "/inquiries/{resolved}"),
    Visit("instructor", "/inquiries/{open}"),
    Visit("instructor", "/instructor/students/{student}"),  # with its due dates, one an extension
    Visit("instructor", "/instructor/students/{student}/link"),
    Visit("instructor", "/instructor/students/{student}/revoke"),
    Visit("instructor", "/instructor/regrade/{exercise}"),
    Visit("instructor", "/instructor/exercises/{exercise}"),
    Visit("instructor", "/exercises/{exercise}"),
    Visit("instructor", "/submissions/{failing}"),  # the grade's adjustment and the code graded
    Visit("instructor", "/submissions/{failing}/report"),
    Visit("instructor", "/instructor/site/index.html"),
    Visit("instructor", "/instructor/site/best/index.html"),
    Visit("instructor", "/instructor/similarity/{exercise}"),
    Visit("instructor", "/instructor/similarity/{exercise}/1"),
]

# The HTML report of each kind of golden scorecard (tests/golden): passing, failing, refused, an error, a
# timeout, the free tier's (suites not run), hostile text.
REPORTS = ["reference", "mutant", "stub", "rejected_syntax", "error_killed", "timeout_free", "reference_free",
           "evil_free"]


@dataclass
class Course:
    """A served course: a student with a failing and a passing graded submission, two grade inquiries of
    theirs answered by a TA and the instructor, an extension, a newcomer who has not answered yet, and the
    sessions of each reader."""

    url: str
    cookies: dict[str, str]
    fields: dict[str, str]


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("project")
    toml = exercise_copy(folder) / "exercise.toml"
    text = re.sub(r"submission_interval_s = \d+", "submission_interval_s = 1", toml.read_text())
    toml.write_text(text.replace("[web]\n", "[web]\nopens = 2026-01-05T09:00:00+01:00\n"
                                             "due = 2036-06-30T23:59:00+02:00\n"))
    with local_server(folder, cwd=folder) as server:
        instructor, csrf = signed_in(server, server.instructor_link)
        links = import_roster(server, instructor, csrf, "id,name,tier,role\nada,Ada L,premium,\nlin,Lin B,premium,\n"
                                                        "bea,Bea T,,ta\n")
        student, token = signed_in(server, links["ada"])
        newcomer, _ = signed_in(server, links["lin"])
        ta, ta_csrf = signed_in(server, links["bea (TA)"])
        student.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "2"})
        graded = {}
        for name, source in (("failing", MUTANT), ("passing", REFERENCE)):
            done = student.post(f"/exercises/{EXERCISE}/submit", data={"csrf": token, "code": source.read_text()})
            graded[name] = wait_graded(student, str(done.url)).url.path.rsplit("/", 1)[-1]
        inquiries = ask_and_answer(student, token, ta, ta_csrf, instructor, csrf, graded["failing"])
        extended = instructor.post("/instructor/students/ada/extension",
                                   data={"csrf": csrf, "exercise": EXERCISE, "due": "2036-07-03T12:00"})
        assert extended.status_code == 200 and "(an extension)" in extended.text, extended.text[:2000]
        yield Course(server.url,
                     {who: client.cookies["grader_session"] for who, client in
                      (("instructor", instructor), ("student", student), ("newcomer", newcomer), ("ta", ta))},
                     {"exercise": EXERCISE, "student": "ada", "link": links["ada"].removeprefix(server.url),
                      **graded, **inquiries})


def ask_and_answer(student: Any, token: str, ta: Any, ta_csrf: str, instructor: Any, csrf: str,
                   submission: str) -> dict[str, str]:
    """The student asks about the whole submission and about one test of it; the TA answers the first and
    resolves it, the instructor answers the second and the student adds to it, still open."""
    form = student.get(f"/submissions/{submission}/inquiry")
    test_id = re.search(r'<option value="([^"]+)">the test ', form.text)
    assert form.status_code == 200 and test_id, form.text[:2000]
    made = {}
    for name, about in (("resolved", ""), ("open", test_id.group(1))):
        asked = student.post(f"/submissions/{submission}/inquiry",
                             data={"csrf": token, "about": about, "message": f"Why this grade?\nAbout {about or 'all'}."})
        assert asked.status_code == 200 and re.search(r"/inquiries/\d+$", asked.url.path), asked.text[:2000]
        made[name] = asked.url.path.rsplit("/", 1)[-1]
    for client, data, inquiry in ((ta, {"csrf": ta_csrf, "message": "The test is right.", "resolve": "1"}, "resolved"),
                                  (instructor, {"csrf": csrf, "message": "Look at the head of the queue."}, "open"),
                                  (student, {"csrf": token, "message": "Thanks: and the second case?"}, "open")):
        answered = client.post(f"/inquiries/{made[inquiry]}/reply", data=data)
        assert answered.status_code == 200, answered.text[:2000]
    states = {name: re.search(r"<b>(Open|Resolved)</b>", student.get(f"/inquiries/{made[name]}").text) for name in made}
    assert {name: found and found.group(1) for name, found in states.items()} == {"resolved": "Resolved", "open": "Open"}
    return made


def open_as(new_page: Any, course: Course, who: str) -> Any:
    page = new_page()
    if who != "nobody":
        page.context.add_cookies([{"name": "grader_session", "value": course.cookies[who], "url": course.url + "/",
                                   "httpOnly": True, "sameSite": "Lax"}])
    return page


@pytest.mark.parametrize("visit", SERVICE_PAGES, ids=str)
def test_axe_finds_nothing_on_the_service_page(new_page, axe, course, visit: Visit):
    page = open_as(new_page, course, visit.who)
    url = course.url + visit.path.format(**course.fields)
    answer = page.goto(url)
    assert answer is not None and answer.status == visit.status, (url, answer and answer.status)
    check_page(page, axe, f"{visit.who}'s {url}")


@pytest.mark.parametrize("name", REPORTS)
def test_axe_finds_nothing_on_the_html_report(page, axe, tmp_path: Path, name: str):
    path = tmp_path / f"{name}.html"
    path.write_text(render_html(golden.load(name)), encoding="utf-8")
    page.goto(path.as_uri())
    check_page(page, axe, f"the report of {name}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The published site of three students (stub then reference, reference then mutant, the mutant once)."""
    db = tmp_path_factory.mktemp("store") / "class.db"
    cards = {STUB: golden.load("stub"), REFERENCE: golden.load("reference"), MUTANT: golden.load("mutant")}
    with Store(db) as store:
        for student, files in {"alice": [STUB, REFERENCE], "bob": [REFERENCE, MUTANT], "carol": [MUTANT]}.items():
            for path in files:
                submission, _ = store.add_submission(student, EXERCISE, "premium", cards[path].submission_sha256,
                                                     path.name, path.read_bytes())
                store.save_scorecard(submission, cards[path])
        out = tmp_path_factory.mktemp("site") / "site"
        return list(publish(store, out, policy="latest").pages)


def test_axe_finds_nothing_on_the_published_site(new_page, axe, site: list[Path]):
    assert len(site) == 4  # the overview and three students
    for path in site:
        page = new_page()
        page.goto(path.as_uri())
        check_page(page, axe, f"the published {path.name}")


def check_html(page: Any, axe: str, html: str, what: str) -> None:
    """A page the browser cannot open by its URL alone, shown from its HTML (its styles are inline)."""
    page.set_content(html)
    check_page(page, axe, what)


def test_axe_finds_nothing_on_the_pages_no_url_opens_alone(page, axe, lti):  # noqa: F811
    """The LMS's pages (placing an exercise, the dashboard's LTI block with a score not sent yet), the page
    of a body over the size cap, and the submit route's page while the store is away."""
    from grader.web.base import render

    client = lti.client()
    placing = launch(client, lti.platform, "teacher-1", roles=(INSTRUCTOR,), message_type="LtiDeepLinkingRequest")
    assert placing.status_code == 200, placing.text[:500]
    check_html(page, axe, placing.text, "the LMS's page to place an exercise")
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303  # the LMS's ada.lovelace
    grade(lti, "ada.lovelace", 3, "a")  # a score not sent yet: the block lists it, with its button
    dashboard = client.get("/instructor")
    assert dashboard.status_code == 200 and 'id="lti"' in dashboard.text
    check_html(page, axe, dashboard.text, "the dashboard's LTI block")
    too_large = lti.client().post(f"/exercises/{EXERCISE}/submit", content=b"x" * (lti.service.max_request_bytes + 1))
    assert too_large.status_code == 413, too_large.status_code
    check_html(page, axe, too_large.text, "the page of a body over the cap")
    for kept, code in ((True, None), (False, "def schedule(self):\n    return []\n")):
        away = render("away.html.j2", status=202 if kept else 503, who=None, title="The store is away",
                      message="Your submission is kept and will be graded.", exercise=lti.exercise, code=code,
                      kept=kept)
        check_html(page, axe, away.body.decode(), f"the submit route's page with the store away (kept: {kept})")
