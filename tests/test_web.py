"""`grader serve` over HTTP: a real uvicorn on loopback, spoken to with httpx, grading in its own
threads on the local sandbox. Tests of routes and rules alone (sign-in, roles, CSRF, refusals, paths)
run in-process, in the fast loop: tests/test_web_in_process.py."""

from __future__ import annotations

import concurrent.futures
import re
import socket
import threading
import time

import httpx
import pytest

from grader.course.store import Store
from grader.service import accounts
from tests.helpers import EXERCISE, PROJECT, REFERENCE, STUB, exercise_copy, mutant_file
from tests.service import import_roster, local_server, press_sign_in, signed_in, wait_graded

MUTANT = mutant_file("03_skip_blocked_head")
ROSTER = ("id,name,tier\nalice,Alice,free\nbob,Bob,premium\ncarol,Carol,free\ndave,Dave,free\nerin,Erin,free\n"
          "frank,Frank,free\ngrace,Grace,free\nheidi,Heidi,free\n")
PAGE = f"/exercises/{EXERCISE}"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with local_server(tmp_path_factory.mktemp("serve"), "--workers", "2", "--max-request-kb", "512") as server:
        yield server


@pytest.fixture(scope="module")
def instructor(server):
    return signed_in(server, server.instructor_link)


@pytest.fixture(scope="module")
def links(server, instructor):
    client, csrf = instructor
    return import_roster(server, client, csrf, ROSTER)


def student(server, links, name):
    client, csrf = signed_in(server, links[name])
    answer = client.post(f"{PAGE}/prediction", data={"csrf": csrf, "choice": "2"})
    assert answer.status_code == 200 and 'id="code"' in answer.text
    return client, csrf


def submit(client, csrf, source: str):
    return client.post(f"{PAGE}/submit", data={"csrf": csrf, "code": source})


def test_the_instructor_link_works_once_and_the_cookie_is_httponly_and_samesite(server, instructor, links):
    assert set(links) == {"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
    again = httpx.get(server.instructor_link, follow_redirects=False)
    assert again.status_code == 403 and "not valid" in again.text
    for _ in range(2):  # a student's link lasts; opening it signs nobody in, its button does
        opened = httpx.get(links["erin"], follow_redirects=False)
        assert opened.status_code == 200 and "grader_session" not in opened.headers.get("set-cookie", "")
        pressed = press_sign_in(server.client(), links["erin"])
        assert pressed.status_code == 303
        cookie = pressed.headers["set-cookie"].lower()
        assert cookie.startswith("grader_session=") and "httponly" in cookie and "samesite=lax" in cookie


def test_a_submission_is_queued_graded_and_reported_and_appears_in_the_history(server, links):
    client, csrf = student(server, links, "alice")
    page = client.get(PAGE)
    assert "Before you code" in page.text and "def test_decodes_run_before_the_prompt" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert "<script" not in page.text.lower()
    submitted = submit(client, csrf, MUTANT.read_text())
    assert re.search(r"/submissions/\d+$", str(submitted.url)), submitted.text
    assert STATE.findall(submitted.text)[0] in ("queued", "grading", "graded")
    graded = wait_graded(client, str(submitted.url))
    assert graded.extensions["states"][-1] == "graded"
    report = client.get(f"{submitted.url}/report")
    assert report.status_code == 200 and "<script" not in report.text.lower()
    assert "test_decodes_run_before_the_prompt" in report.text
    history = client.get("/history")
    assert str(submitted.url).rsplit("/", 1)[1] in history.text and "graded" in history.text


STATE = re.compile(r'data-state="(\w+)"')


def test_a_student_never_reaches_another_students_submission(server, links):
    owner, csrf = student(server, links, "carol")
    mine = submit(owner, csrf, STUB.read_text())
    number = str(mine.url).rsplit("/", 1)[1]
    wait_graded(owner, str(mine.url))
    assert owner.get(f"/submissions/{number}/report").status_code == 200
    other, _ = student(server, links, "dave")
    for path in (f"/submissions/{number}", f"/submissions/{number}/report"):
        refused = other.get(path)
        assert refused.status_code == 404 and "Graded" not in refused.text, path
    assert other.get("/instructor").status_code == 403
    assert other.get("/instructor/students/carol").status_code == 403


def test_a_free_student_sees_no_hidden_test_and_no_solution(server, links):
    client, _ = student(server, links, "dave")
    page = client.get(PAGE).text
    hidden = (PROJECT / "hidden_tests" / EXERCISE / "test_hidden_rules.py").read_text()
    first_hidden_test = re.search(r"def (test_\w+)", hidden).group(1)
    assert f"def {first_hidden_test}" not in page and "part of Premium" in page
    refused = client.get(f"{PAGE}/solution")
    assert refused.status_code == 403 and "class Scheduler" not in refused.text


def test_a_premium_student_opens_the_solution_after_a_first_graded_submission(server, links):
    client, csrf = student(server, links, "bob")
    assert client.get(f"{PAGE}/solution").status_code == 403  # the exercise's rule: after_first_graded
    wait_graded(client, str(submit(client, csrf, REFERENCE.read_text()).url))
    opened = client.get(f"{PAGE}/solution")
    assert opened.status_code == 200 and "class Scheduler" in opened.text


def test_a_second_submission_too_soon_is_refused_with_the_seconds_to_wait(server, links):
    client, csrf = student(server, links, "erin")
    first = submit(client, csrf, STUB.read_text())
    assert re.search(r"/submissions/\d+$", str(first.url))
    again = submit(client, csrf, STUB.read_text() + "\n# changed by erin\n")
    assert again.status_code == 429
    assert re.search(r"you can submit again in \d+ s\b", again.text)
    assert "# changed by erin" in again.text  # the code typed is still in the editor
    history = client.get("/history").text
    assert history.count("/submissions/") - history.count("/report") == 1  # one submission only


def test_submissions_sent_at_once_are_taken_one_at_a_time(server, links):
    _, csrf = student(server, links, "grace")
    cookies = server.clients[-1].cookies

    clients = [httpx.Client(base_url=server.url, cookies=cookies, timeout=60) for _ in range(12)]
    for client in clients:
        client.get("/history")  # each holds an open connection: the posts leave together
    start = threading.Barrier(len(clients))

    def send(number: int) -> int:
        start.wait()
        return submit(clients[number], csrf, f"{STUB.read_text()}\n# attempt {number}\n").status_code

    with concurrent.futures.ThreadPoolExecutor(len(clients)) as pool:
        codes = sorted(pool.map(send, range(len(clients))))
    for client in clients:
        client.close()
    assert codes == [303] + [429] * (len(clients) - 1)


def test_a_roster_the_csv_reader_cannot_read_is_refused_naming_its_line(server, instructor):
    client, csrf = instructor
    for csv in ('id,name\nzed,"' + "a" * 140_000 + '"\n', 'id,name\nzed,"Z\n'):
        refused = client.post("/instructor/roster", data={"csrf": csrf, "csv": csv})
        assert refused.status_code == 400 and "roster line 2" in refused.text
    upload = client.post("/instructor/roster", data={"csrf": csrf},
                         files={"file": ("roster.csv", "\ufeffid,name\nolga,Olga\n".encode())})
    assert upload.status_code == 200 and "1 student(s) imported" in upload.text


def test_opening_a_one_time_link_uses_nothing_until_its_button_is_pressed(server):
    with Store(server.log.parent / "class.db") as store:
        link = f"{server.url}/signin/{accounts.new_link(store, 'instructor')}"
    for _ in range(2):  # a link checker, a chat's preview, a mail scanner
        assert httpx.head(link).status_code == 200
        shown = httpx.get(link)
        assert shown.status_code == 200 and "Sign in" in shown.text
        assert "grader_session" not in shown.headers.get("set-cookie", "")  # no session
    client, _ = signed_in(server, link)  # the button
    assert client.get("/instructor").status_code == 200
    assert httpx.get(link).status_code == 403 and httpx.post(link).status_code == 403  # used once


def test_a_form_without_the_sessions_csrf_token_is_refused_and_stores_nothing(server, links, instructor):
    client, csrf = signed_in(server, links["alice"])
    before = client.get("/history").text.count("<tr>")
    for data in ({"code": "x = 1\n"}, {"code": "x = 1\n", "csrf": "forged"}):
        refused = client.post(f"{PAGE}/submit", data=data)
        assert refused.status_code == 403 and "Form expired" in refused.text
    assert client.get("/history").text.count("<tr>") == before
    # Another session's token does not do either, and neither does the instructor's.
    _, other_csrf = signed_in(server, links["dave"])
    assert client.post(f"{PAGE}/submit", data={"code": "x = 1\n", "csrf": other_csrf}).status_code == 403
    assert client.post("/signout", data={"csrf": instructor[1]}).status_code == 403


def test_an_oversize_body_is_refused_whether_declared_or_streamed(server, links):
    client, csrf = student(server, links, "alice")
    big = "x" * (600 * 1024)
    declared = client.post(f"{PAGE}/submit", data={"csrf": csrf, "code": big})
    assert declared.status_code == 413

    def chunks():
        for _ in range(700):
            yield b"y" * 1024

    streamed = client.post(f"{PAGE}/submit", content=chunks(),
                           headers={"content-type": "application/x-www-form-urlencoded"})
    assert streamed.status_code == 413
    for refused in (declared, streamed):
        assert refused.headers["content-type"].startswith("text/html") and "Too large to send" in refused.text
    # Through a real server, as a browser sends it: the editor's code beside a file too large comes back.
    kept = client.post(f"{PAGE}/submit", data={"csrf": csrf, "code": "x = 1  # mine\n"},
                       files={"upload": ("scheduler.py", b"#" * (700 * 1024))})
    assert kept.status_code == 413 and 'id="problem"' in kept.text
    assert re.search(r'<textarea id="code"[^>]*>x = 1  # mine\n</textarea>', kept.text)


def test_the_instructor_sees_overview_histories_gradebooks_and_can_regrade(server, instructor, links):
    client, csrf = instructor
    frank, frank_csrf = student(server, links, "frank")
    wait_graded(frank, str(submit(frank, frank_csrf, MUTANT.read_text()).url))
    history = client.get("/instructor/students/frank")
    number = re.search(r'href="/submissions/(\d+)/report"', history.text)
    assert number, "frank's graded submission is in his history"
    assert client.get(f"/submissions/{number.group(1)}/report").status_code == 200
    overview = client.get("/instructor/site/index.html")
    assert overview.status_code == 200 and "Class overview" in overview.text
    gradebook = client.get(f"/instructor/site/gradebook-{EXERCISE}.csv")
    assert gradebook.status_code == 200 and gradebook.text.startswith("student,name,tier,score,max_score")
    assert "frank" in gradebook.text
    assert client.get(f"/instructor/site/gradebook-{EXERCISE}.json").json()["columns"][0] == "student"
    # The best submissions' overview keeps its policy through its relative links.
    moved = client.get("/instructor/site/index.html?policy=best", follow_redirects=False)
    assert moved.status_code == 303 and moved.headers["location"] == "/instructor/site/best/index.html"
    best = client.get("/instructor/site/best/index.html")
    assert best.status_code == 200 and "Class overview" in best.text
    for href in set(re.findall(r'href="([^":#?/][^":#?]*)"', best.text)):  # relative: the site's own
        assert client.get(f"/instructor/site/best/{href}").status_code == 200, href
    assert set(re.findall(r'href="(/[^"]*)"', best.text)) == {"/instructor"}  # the way back to the dashboard
    regraded = client.post(f"/instructor/regrade/{EXERCISE}", data={"csrf": csrf})
    assert regraded.status_code == 200 and "queued for regrading" in regraded.text
    graded = wait_graded(frank, f"/submissions/{number.group(1)}")
    assert "Graded" in graded.text
    with Store(server.log.parent / "class.db") as store:  # the earlier scorecard is kept; the newest counts
        assert len(store.scorecards(int(number.group(1)))) == 2
    # Other tests' students share this server: wait until every regraded submission is graded again.
    # The same files graded by the same suites change no score.
    deadline = time.monotonic() + 240
    while "waiting to be graded" in (summary := client.get(f"/instructor/regrade/{EXERCISE}")).text:
        assert time.monotonic() < deadline, summary.text
        time.sleep(0.5)
    tally = re.search(r"(\d+) score\(s\) changed, (\d+) unchanged", summary.text)
    assert tally and tally.group(1) == "0" and int(tally.group(2)) >= 1, summary.text


def test_the_address_given_is_on_loopback(server):
    host = server.url.split("//")[1].rsplit(":", 1)[0]
    assert host == "127.0.0.1" and socket.inet_aton(host)


@pytest.mark.parametrize("edit, kept", [(None, True), (("answer = 3", "answer = 5"), False),
                                        (('solution = "after_first_graded"', 'solution = "sometimes"'), False)])
def test_serve_leaves_out_an_exercise_whose_web_settings_are_wrong_before_any_student_sees_it(
        tmp_path, monkeypatch, caplog, edit, kept):
    from grader.web.serve import load_exercises

    folder = exercise_copy(tmp_path)
    if edit:
        toml = folder / "exercise.toml"
        assert edit[0] in toml.read_text()
        toml.write_text(toml.read_text().replace(*edit))
    monkeypatch.chdir(tmp_path)
    assert list(load_exercises()) == ([EXERCISE] if kept else [])
    assert kept or f"exercise {EXERCISE} left out" in caplog.text


# Every schedule() sleeps 4.5 s, just under the 5 s call limit: each grading runs to the total limit.
SLEEPER = b'''

import time as _time

_plain_schedule = Scheduler.schedule


def _sleep_then_schedule(self):
    _time.sleep(4.5)
    return _plain_schedule(self)


Scheduler.schedule = _sleep_then_schedule
'''


def test_a_student_whose_submissions_each_run_to_the_time_limit_never_holds_every_grading_thread(tmp_path):
    total_s = 60
    folder = exercise_copy(tmp_path, total_timeout_s=total_s, test_timeout_s=30)
    toml = folder / "exercise.toml"
    assert "submission_interval_s = 30" in toml.read_text()
    toml.write_text(toml.read_text().replace("submission_interval_s = 30", "submission_interval_s = 0"))
    with local_server(tmp_path, "--workers", "2", "--interval", "0", cwd=tmp_path) as server:
        client, csrf = signed_in(server, server.instructor_link)
        links = import_roster(server, client, csrf, "id\nmallory\nalice\n")
        sleeper, sleeper_csrf = student(server, links, "mallory")
        slow = [str(submit(sleeper, sleeper_csrf, (REFERENCE.read_bytes() + SLEEPER).decode() + f"\n# {n}\n").url)
                for n in range(3)]
        assert all(re.search(r"/submissions/\d+$", url) for url in slow), slow
        honest, honest_csrf = student(server, links, "alice")
        started = time.monotonic()
        mine = submit(honest, honest_csrf, REFERENCE.read_text())
        wait_graded(honest, str(mine.url), wait_s=total_s * 3)
        waited = time.monotonic() - started
        states = [STATE.findall(sleeper.get(url).text)[0] for url in slow]
        # Graded in half the time any of the sleeper's gradings takes: it never waited for one of them.
        assert waited < total_s / 2, (waited, states)
        # The sleeper holds one thread; her second and third wait for her first.
        assert states == ["grading", "queued", "queued"], states
    with Store(tmp_path / "class.db") as store:
        (card,) = [s.card for s in store.submissions(EXERCISE, "alice")]
        assert card.status == "graded" and card.score == card.max_score > 0
