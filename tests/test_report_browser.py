"""The HTML report in a real browser: the system's headless Chromium, driven with Playwright (tests/browser.py).

It loads the report of a failing mutant, checks that nothing is fetched and nothing is logged as an
error, that the page fits a phone's width, that printing unfolds every test, and saves screenshots.

Skipped when Chromium is missing, except under CI=true (CI installs it: .ci/run), where that fails.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
from pathlib import Path

import pytest

from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.core.scorecard import Scorecard
from grader.report import render_html, report_view
from grader.sandbox.local import run_local
from tests.browser import Page, expect, problems, requests, screenshot
from tests.helpers import EXERCISE, mutant_file

MUTANT = mutant_file("03_skip_blocked_head")
SHOTS = Path(os.environ.get("GRADER_SCREENSHOTS", Path(tempfile.gettempdir()) / "grader-report-screenshots"))
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


def test_the_report_loads_with_no_request_and_no_error(page: Page, report_file: Path, card: Scorecard):
    url = report_file.as_uri()
    page.goto(url)
    assert requests(page) == [url], "the page must fetch nothing but itself"
    assert problems(page) == []
    expect(page.locator("script")).to_have_count(0)
    expect(page).to_have_title(re.compile(r"^One step of a continuous-batching scheduler"))
    # The first failed test of each cause is open, passed ones and repeats of a cause folded; the
    # failing trace is drawn with its first difference.
    groups = report_view(card)["groups"]
    expect(page.locator("details.test.s-failed[open]")).to_have_count(len(groups))
    expect(page.locator("details.test.s-failed:not([open])")).to_have_count(sum(g["count"] - 1 for g in groups))
    expect(page.locator("details.test.s-passed[open]")).to_have_count(0)
    expect(page.locator("details.test.s-failed[open] .timeline .diff-band").first).to_be_attached()
    expect(page.locator("tr.first[data-first-difference]").first).to_be_attached()
    shot = screenshot(page, SHOTS / "report-desktop.png")
    print(f"\nscreenshot: {shot}")
    assert problems(page) == [] and requests(page) == [url]


def test_the_report_fits_a_phone(new_page, report_file: Path):
    page = new_page(*PHONE, mobile=True)
    page.goto(report_file.as_uri())
    # Nothing makes the page itself scroll sideways: wide charts and tables scroll in their own box.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE[0]
    shot = screenshot(page, SHOTS / "report-phone.png")
    print(f"\nscreenshot: {shot}")
    assert problems(page) == []


def test_printing_unfolds_every_test(page: Page, described_report_file: Path):
    page.goto(described_report_file.as_uri())
    folded = page.locator("details.test:not([open]) .tbody")
    count = folded.count()
    assert count > 0
    for body in folded.all():
        expect(body).to_be_hidden()
    page.emulate_media(media="print")
    expect(folded).to_have_count(count)
    for body in folded.all():
        expect(body).to_be_visible()  # a box of some width and height, shown
        box = body.bounding_box()
        assert box is not None and box["height"] > 0
    shot = screenshot(page, SHOTS / "report-print.png")
    print(f"\nscreenshot: {shot}")
