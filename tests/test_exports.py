"""Exports for other platforms, checked against their published formats.

- Gradescope results.json: https://gradescope-autograders.readthedocs.io/en/latest/specs/
- PrairieLearn results.json: https://prairielearn.readthedocs.io/en/latest/externalGrading/ ("Grading results")
- JUnit XML as Jenkins (junit-10.xsd) and GitLab (unit test reports) read it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.cli import main
from grader.exercise import load_exercise
from grader.exports import EXPORTS, gradescope, junit, prairielearn
from grader.grading import grade_bytes
from grader.harness.feedback import Feedback
from grader.sandbox.local import run_local
from grader.scorecard import Scorecard
from grader.scorecard import TestResult as Result
from tests.helpers import EXERCISE, PROJECT, REFERENCE

MUTANT = PROJECT / "solutions" / EXERCISE / "mutants" / "03_skip_blocked_head.py"

GRADESCOPE_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
                  "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
GRADESCOPE_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                   "tags", "visibility", "extra_data"}
GRADESCOPE_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
GRADESCOPE_FORMATS = {"text", "simple_format", "html", "md", "ansi"}
PRAIRIELEARN_TEST = {"name", "description", "points", "max_points", "message", "output"}


@pytest.fixture(scope="module")
def cards() -> dict[str, Scorecard]:
    exercise = load_exercise(EXERCISE)
    jobs = {"mutant": (MUTANT.read_bytes(), "premium"), "free": (REFERENCE.read_bytes(), "free"),
            "rejected": (b"def f(:\n", "premium")}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(grade_bytes, data, exercise, tier, run_local, "local")
                   for name, (data, tier) in jobs.items()}
        graded = {name: future.result() for name, future in futures.items()}
    graded["error"] = Scorecard(EXERCISE, "premium", "ef" * 32, "error", 0, 58, backend="docker",
                                reason="the grading harness ended without results (exit status 137)")
    graded["every status"] = every_status()
    return graded


def every_status() -> Scorecard:
    feedback = Feedback()
    feedback.trace("plans", [[("r1", 2)], [("r1", 1)]], [[("r1", 2)], [("r1", 1), ("r2", 3)]])
    feedback.table("values", ["a", "b"], [[1, 2], [3, None]], mark_row=1)
    hostile = "bad \x00 \x1b[31m \x07 \ud800 \ufffe <tag> & ]]> end"
    tests = [
        Result("v::a", "test_a", "visible", "passed", 5, 5, duration_s=0.5, output="fine\n"),
        Result("v::b", "test_b", "visible", "failed", 0, 5, message="wrong " + hostile, duration_s=0.25,
               traceback=["line 3, in f: return 1"], output=hostile, artifacts=feedback.artifacts),
        Result("h::c", "test_c", "hidden", "timeout", 0, 2, message="schedule() did not return within 5 s"),
        Result("h::d", "test_d", "hidden", "crashed", 0, 2, message="your code was killed: out of memory"),
        Result("h::e", "test_e", "hidden", "error", 0, 2, message="the test was skipped"),
    ]
    return Scorecard(EXERCISE, "premium", "ab" * 32, "graded", 5, 16, tests=tests, backend="local",
                     graded_at="2026-11-30T07:25:26+00:00", duration_s=2.6, grader_version="0.1.0")


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- Gradescope ---------------------------------------------------------------------------------------

def test_gradescope_results_use_only_documented_fields_with_their_types(cards):
    for name, card in cards.items():
        data = json.loads(gradescope(card))
        assert set(data) <= GRADESCOPE_TOP, (name, set(data) - GRADESCOPE_TOP)
        assert is_number(data["score"]) and isinstance(data["execution_time"], int)
        assert isinstance(data["output"], str) and data["output_format"] == "text"  # never rendered as HTML
        assert data["visibility"] in GRADESCOPE_VISIBILITY and data["stdout_visibility"] in GRADESCOPE_VISIBILITY
        assert data["test_output_format"] in GRADESCOPE_FORMATS and isinstance(data["extra_data"], dict)
        assert isinstance(data["tests"], list) and data["tests"]
        for test in data["tests"]:
            assert set(test) <= GRADESCOPE_TEST, (name, set(test) - GRADESCOPE_TEST)
            assert isinstance(test["name"], str) and test["status"] in ("passed", "failed")
            assert isinstance(test["output"], str) and test["visibility"] in GRADESCOPE_VISIBILITY
            assert test["output_format"] == test["name_format"] == "text"
            assert all(isinstance(tag, str) for tag in test.get("tags", []))
            if "score" in test:
                assert is_number(test["score"]) and is_number(test["max_score"])
                assert 0 <= test["score"] <= test["max_score"]


def test_gradescope_scores_match_the_scorecard(cards):
    card = cards["mutant"]
    data = json.loads(gradescope(card))
    assert data["score"] == card.score == sum(t["score"] for t in data["tests"])
    assert sum(t["max_score"] for t in data["tests"]) == card.max_score
    assert [t["name"] for t in data["tests"]] == [t.name for t in card.tests]
    for test, result in zip(data["tests"], card.tests):
        assert test["status"] == ("passed" if result.status == "passed" else "failed")
        assert result.message in test["output"]
        if any(a["kind"] == "trace" for a in result.artifacts):
            assert "<- first difference" in test["output"]


def test_gradescope_says_why_a_run_was_not_graded_and_names_the_locked_tests(cards):
    for name in ("rejected", "error"):
        card = cards[name]
        data = json.loads(gradescope(card))
        assert data["score"] == 0 and card.reason in data["output"] and "What to do next" in data["output"]
        assert data["tests"][0]["status"] == "failed" and "score" not in data["tests"][0]
    free = cards["free"]
    data = json.loads(gradescope(free))
    assert data["score"] == free.score == free.max_score
    assert all(t.name in data["output"] for t in free.locked) and "Premium tests, not run" in data["output"]
    assert data["extra_data"]["locked"] == [t.name for t in free.locked]


# -- PrairieLearn -------------------------------------------------------------------------------------

def test_prairielearn_results_have_the_documented_fields_and_a_fractional_score(cards):
    for name, card in cards.items():
        data = json.loads(prairielearn(card))
        assert isinstance(data["gradable"], bool) and data["gradable"] == (card.status == "graded")
        assert isinstance(data["score"], float) and 0.0 <= data["score"] <= 1.0
        assert isinstance(data["message"], str) and isinstance(data["output"], str)
        for test in data["tests"]:
            assert set(test) == PRAIRIELEARN_TEST
            assert all(isinstance(test[k], str) for k in ("name", "description", "message", "output"))
            assert isinstance(test["points"], int) and isinstance(test["max_points"], int)
            assert 0 <= test["points"] <= test["max_points"]
        if card.status == "graded" and card.max_score:
            assert data["score"] == pytest.approx(card.score / card.max_score)
            assert sum(t["points"] for t in data["tests"]) == card.score
        else:
            assert data["score"] == 0.0 and data["tests"] == []
            assert data["format_errors"] == [card.reason.strip()]
            assert card.reason in data["output"]


def test_prairielearn_results_stay_under_one_megabyte():
    tests = [Result(f"h::t{i}", f"test_{i}", "hidden", "failed", 0, 1, message="x" * 50_000, output="y" * 50_000)
             for i in range(200)]
    card = Scorecard(EXERCISE, "premium", "00" * 32, "graded", 0, 200, tests=tests)
    text = prairielearn(card)
    assert len(text.encode("utf-8")) < 1_000_000
    assert len(json.loads(text)["tests"]) == 200


# -- JUnit --------------------------------------------------------------------------------------------

def parse_junit(text: str) -> ET.Element:
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    return root


def test_junit_counts_match_the_testcases_and_the_scorecard(cards):
    for name, card in cards.items():
        root = parse_junit(junit(card))
        totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
        for suite in root.findall("testsuite"):
            cases = suite.findall("testcase")
            counts = {"tests": len(cases),
                      "failures": sum(c.find("failure") is not None for c in cases),
                      "errors": sum(c.find("error") is not None for c in cases),
                      "skipped": sum(c.find("skipped") is not None for c in cases)}
            assert {k: int(suite.get(k)) for k in counts} == counts, (name, suite.get("name"))
            assert suite.get("name") and float(suite.get("time")) >= 0
            for case in cases:
                assert case.get("name") and float(case.get("time")) >= 0
                assert case.get("classname").startswith(f"{card.exercise}.")
                assert sum(case.find(tag) is not None for tag in ("failure", "error", "skipped")) <= 1
            for key in totals:
                totals[key] += counts[key]
        assert {k: int(root.get(k)) for k in totals} == totals
        if card.status == "graded":
            assert totals["tests"] == len(card.tests) + len(card.locked)
            assert totals["failures"] == sum(t.status == "failed" for t in card.tests)
            assert totals["errors"] == sum(t.status in ("timeout", "crashed", "error") for t in card.tests)
            assert totals["skipped"] == len(card.locked)


def test_junit_maps_each_status_and_keeps_the_details():
    card = every_status()
    root = parse_junit(junit(card))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert [s.get("name") for s in root.findall("testsuite")] == [f"{EXERCISE}.visible", f"{EXERCISE}.hidden"]
    assert cases["test_a"].find("failure") is None and cases["test_a"].find("system-out").text == "fine\n"
    failure = cases["test_b"].find("failure")
    assert failure.get("type") == "failed" and failure.get("message").startswith("wrong bad")
    assert "<- first difference" in failure.text and "line 3, in f: return 1" in failure.text
    assert cases["test_b"].get("classname") == f"{EXERCISE}.visible" and cases["test_b"].get("time") == "0.250"
    for name, status in (("test_c", "timeout"), ("test_d", "crashed"), ("test_e", "error")):
        assert cases[name].find("error").get("type") == status
    # What XML cannot hold (NUL, ESC, BEL, a lone surrogate, U+FFFE) never makes the file unreadable.
    out = cases["test_b"].find("system-out").text
    assert "\u2400" in out and "\u2407" in out and "<tag> & ]]> end" in out


def test_junit_of_a_run_that_was_not_graded_is_one_errored_case(cards):
    for name in ("rejected", "error"):
        card = cards[name]
        root = parse_junit(junit(card))
        suites = root.findall("testsuite")
        assert len(suites) == 1 and len(suites[0].findall("testcase")) == 1
        error = suites[0].find("testcase/error")
        assert error.get("type") == card.status and card.reason.splitlines()[0] in error.get("message")
        assert card.reason in error.text


def test_junit_lists_locked_premium_tests_as_skipped(cards):
    card = cards["free"]
    root = parse_junit(junit(card))
    skipped = [c.get("name") for c in root.iter("testcase") if c.find("skipped") is not None]
    assert skipped == [t.name for t in card.locked]
    notes = [c.find("skipped").get("message") for c in root.iter("testcase") if c.find("skipped") is not None]
    assert notes and all(note == "Premium tests: not run on the free tier" for note in notes)


# -- the command line ---------------------------------------------------------------------------------

def test_every_export_is_reachable_from_the_command_line(cards, tmp_path: Path):
    assert set(EXPORTS) == {"gradescope", "prairielearn", "junit"}
    path = tmp_path / "card.json"
    cards["mutant"].write(path)
    for name, export in EXPORTS.items():
        out = tmp_path / f"out.{name}"
        assert main(["export", str(path), "--format", name, "-o", str(out)]) == 0
        assert out.read_text(encoding="utf-8") == export(Scorecard.read(path))
