"""The HTML report in a real browser: headless Chromium, driven over the DevTools protocol.

The protocol runs over a pipe (`--remote-debugging-pipe`: commands in on fd 3, replies out on fd 4,
each a JSON message ended by a NUL byte), so the test needs no extra package and opens no port.
It loads the report of a failing mutant, checks that nothing is fetched and nothing is logged as an
error, that the page fits a phone's width, that printing unfolds every test, and saves screenshots.

Skipped when Chromium is missing, except under CI=true (CI installs it: .ci/run), where that fails.
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path

import pytest

from grader.exercise import load_exercise
from grader.grading import grade_bytes
from grader.report import render_html, report_view
from grader.sandbox.local import run_local
from grader.scorecard import Scorecard
from tests.browser import Browser
from tests.helpers import EXERCISE, PROJECT

MUTANT = PROJECT / "solutions" / EXERCISE / "mutants" / "03_skip_blocked_head.py"
SHOTS = Path(os.environ.get("GRADER_SCREENSHOTS", Path(tempfile.gettempdir()) / "grader-report-screenshots"))
DESKTOP = (1280, 900)
PHONE = (390, 844)


@pytest.fixture(scope="module")
def card() -> Scorecard:
    card = grade_bytes(MUTANT.read_bytes(), load_exercise(EXERCISE), "premium", run_local, "local")
    assert card.status == "graded" and 0 < card.score < card.max_score
    return card


@pytest.fixture(scope="module")
def report_file(card: Scorecard, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_html(card), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def described_report_file(card: Scorecard, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same report with a description on every test (from the test's docstring, when it has
    one), so that folded passed tests have something to unfold."""
    described = copy.deepcopy(card)
    for test in described.tests:
        test.description = f"what {test.name} checks"
    path = tmp_path_factory.mktemp("report") / "described.html"
    path.write_text(render_html(described), encoding="utf-8")
    return path


def test_the_report_loads_with_no_request_and_no_error(browser: Browser, report_file: Path, card: Scorecard):
    browser.viewport(*DESKTOP)
    url = report_file.as_uri()
    browser.open(url)
    assert browser.requests() == [url], "the page must fetch nothing but itself"
    assert browser.problems() == []
    assert browser.evaluate("document.scripts.length") == 0
    assert browser.evaluate("document.title").startswith("One step of a continuous-batching scheduler")
    # The first failed test of each cause is open, passed ones and repeats of a cause folded; the
    # failing trace is drawn with its first difference.
    groups = report_view(card)["groups"]
    assert browser.evaluate("document.querySelectorAll('details.test.s-failed[open]').length") == len(groups)
    assert browser.evaluate("document.querySelectorAll('details.test.s-failed:not([open])').length") == sum(
        g["count"] - 1 for g in groups)
    assert browser.evaluate("document.querySelectorAll('details.test.s-passed[open]').length") == 0
    assert browser.evaluate("document.querySelectorAll('details.test.s-failed[open] .timeline .diff-band').length") >= 1
    assert browser.evaluate("document.querySelectorAll('tr.first[data-first-difference]').length") >= 1
    shot = browser.screenshot(SHOTS / "report-desktop.png")
    print(f"\nscreenshot: {shot}")
    assert browser.problems() == [] and browser.requests() == [url]


def test_the_report_fits_a_phone(browser: Browser, report_file: Path):
    browser.viewport(*PHONE, mobile=True)
    browser.open(report_file.as_uri())
    # Nothing makes the page itself scroll sideways: wide charts and tables scroll in their own box.
    assert browser.evaluate("document.documentElement.scrollWidth") <= PHONE[0]
    shot = browser.screenshot(SHOTS / "report-phone.png")
    print(f"\nscreenshot: {shot}")
    assert browser.problems() == []


def test_printing_unfolds_every_test(browser: Browser, described_report_file: Path):
    browser.viewport(*DESKTOP)
    browser.open(described_report_file.as_uri())
    folded = "[...document.querySelectorAll('details.test:not([open]) .tbody')]"
    assert browser.evaluate(f"{folded}.length") > 0
    assert browser.evaluate(f"{folded}.every(e => !e.checkVisibility())")
    browser.page("Emulation.setEmulatedMedia", media="print")
    try:
        assert browser.evaluate(f"{folded}.every(e => e.checkVisibility() && e.getBoundingClientRect().height > 0)")
        shot = browser.screenshot(SHOTS / "report-print.png")
        print(f"\nscreenshot: {shot}")
    finally:
        browser.page("Emulation.setEmulatedMedia", media="")
