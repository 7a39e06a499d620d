"""The service in headless Chromium, as a student uses it: sign in with the link, answer the
prediction, submit a wrong scheduler, read the report, submit the reference, see full marks. At
desktop and phone widths, with no console error and nothing requested from anywhere else.

Screenshots go to $GRADER_SCREENSHOTS (default: a folder in the temporary directory)."""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import pytest

from tests.browser import Browser
from tests.helpers import EXERCISE, PROJECT, REFERENCE, exercise_copy
from tests.service import import_roster, local_server, signed_in

pytestmark = pytest.mark.slow
MUTANT = PROJECT / "solutions" / EXERCISE / "mutants" / "03_skip_blocked_head.py"
SHOTS = Path(os.environ.get("GRADER_SCREENSHOTS", Path(tempfile.gettempdir()) / "grader-service-screenshots"))
WIDTHS = {"desktop": (1280, 900, False), "phone": (390, 844, True)}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`grader serve` on a private copy of the exercise that allows a new submission every second."""
    folder = tmp_path_factory.mktemp("project")
    toml = exercise_copy(folder) / "exercise.toml"
    toml.write_text(re.sub(r"submission_interval_s = \d+", "submission_interval_s = 1", toml.read_text()))
    with local_server(folder, cwd=folder) as server:
        yield server


@pytest.fixture(scope="module")
def instructor(server):
    return signed_in(server, server.instructor_link)


def go(browser: Browser, script: str) -> None:
    """Run `script` (a click, a form submission) and wait for the page it leads to."""
    browser.events[:] = [e for e in browser.events if e.get("method") != "Page.loadEventFired"]
    browser.evaluate(script)
    browser.wait_for("Page.loadEventFired")


def state(browser: Browser) -> str | None:
    try:
        return browser.evaluate("(document.querySelector('[data-state]') || {dataset: {}}).dataset.state || null")
    except RuntimeError:  # the page was reloading (it refreshes itself while queued)
        return None


def wait_graded(browser: Browser, wait_s: float = 240) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if state(browser) == "graded":
            return
        time.sleep(0.5)
    raise AssertionError("the submission was not graded in time")


def submit_source(browser: Browser, source: str) -> None:
    browser.evaluate(f"document.getElementById('code').value = {source!r}")
    go(browser, "document.querySelector('form[action$=\"/submit\"]').requestSubmit()")
    assert re.search(r"/submissions/\d+$", browser.evaluate("location.pathname"))


def fits(browser: Browser, width: int) -> bool:
    return browser.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("width", list(WIDTHS))
def test_a_student_predicts_submits_a_wrong_scheduler_then_the_reference(browser, server, instructor, width):
    w, h, mobile = WIDTHS[width]
    client, csrf = instructor
    student = f"student-{width}"
    link = import_roster(server, client, csrf, f"id,name,tier\n{student},Ada {width},premium\n")[student]
    browser.viewport(w, h, mobile=mobile)
    browser.open(link)
    assert browser.evaluate("location.pathname") == "/"
    browser.open(f"{server.url}/exercises/{EXERCISE}")
    # The editor opens only after the prediction is answered.
    assert browser.evaluate("document.getElementById('code')") is None
    assert fits(browser, w)
    browser.screenshot(SHOTS / f"exercise-before-{width}.png")
    browser.evaluate("document.querySelector('input[name=choice][value=\"2\"]').click()")
    go(browser, "document.querySelector('#prediction form').requestSubmit()")
    assert "right" in browser.evaluate("document.getElementById('prediction').innerText")
    assert browser.evaluate("document.getElementById('code').value").startswith(
        (PROJECT / "exercises" / EXERCISE / "scheduler.py").read_text()[:40])
    assert fits(browser, w)
    browser.screenshot(SHOTS / f"exercise-editor-{width}.png")

    submit_source(browser, MUTANT.read_text())
    assert state(browser) in ("queued", "grading", "graded")
    browser.screenshot(SHOTS / f"status-{width}.png")
    wait_graded(browser)
    score = browser.evaluate("document.getElementById('score').innerText")
    got, top = map(int, re.match(r"(\d+)/(\d+) points", score).groups())
    assert got < top
    go(browser, "document.querySelector('a.button[href$=\"/report\"]').click()")
    assert browser.evaluate("document.scripts.length") == 0
    assert browser.evaluate("document.querySelectorAll('details.test.s-failed').length") >= 1
    assert fits(browser, w)
    browser.screenshot(SHOTS / f"report-mutant-{width}.png")

    browser.open(f"{server.url}/exercises/{EXERCISE}")
    submit_source(browser, REFERENCE.read_text())
    wait_graded(browser)
    assert browser.evaluate("document.getElementById('score').innerText").startswith(f"{top}/{top} points on the ")
    browser.screenshot(SHOTS / f"status-graded-{width}.png")
    go(browser, "document.querySelector('a.button[href$=\"/report\"]').click()")
    assert browser.evaluate("document.querySelectorAll('details.test.s-failed').length") == 0
    browser.open(f"{server.url}/history")
    assert browser.evaluate("document.querySelectorAll('a[href$=\"/report\"]').length") == 2
    browser.screenshot(SHOTS / f"history-{width}.png")

    assert browser.problems() == []
    outside = [u for u in browser.requests() if not u.startswith(server.url + "/")]
    assert outside == [], "nothing is fetched from anywhere else"


@pytest.mark.parametrize("width", list(WIDTHS))
def test_the_instructor_dashboard_and_overview_load_clean(browser, server, instructor, width):
    w, h, mobile = WIDTHS[width]
    client, _ = instructor
    browser.viewport(w, h, mobile=mobile)
    browser.page("Network.clearBrowserCookies")
    browser.page("Network.setCookie", name="grader_session", value=client.cookies["grader_session"],
                 url=server.url + "/", httpOnly=True, sameSite="Lax")
    browser.open(f"{server.url}/instructor")
    assert browser.evaluate("document.querySelector('h1').innerText") == "Dashboard"
    assert browser.evaluate("document.querySelectorAll('form input[name=csrf]').length") >= 3
    assert fits(browser, w)
    browser.screenshot(SHOTS / f"instructor-{width}.png")
    browser.open(f"{server.url}/instructor/site/index.html")
    assert browser.evaluate("document.title") == "Class overview"
    assert fits(browser, w)
    browser.screenshot(SHOTS / f"overview-{width}.png")
    assert browser.problems() == []
    assert [u for u in browser.requests() if not u.startswith(server.url + "/")] == []
    browser.page("Network.clearBrowserCookies")
