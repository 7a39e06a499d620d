"""Failures grouped by cause, and what a run covered, in the reports (hand-made scorecards: no grading)."""

from __future__ import annotations

import pytest

from grader.core.scorecard import LockedTest, Scorecard
from grader.core.scorecard import TestResult as Result
from grader.report import render_html, render_markdown, report_view
from grader.report.grouping import cause_key, coverage, failure_groups

pytestmark = pytest.mark.unit

DECODE = ("step {step}: expected plan [(r0, 1), (r{rid}, 1)] but your schedule() returned [(r0, 1), (r{rid}, 2)]: "
          "a decode gets exactly 1 token, but r{rid} (prompt fully prefilled) got 2.\nScenario:\n{scenario}")


def failed(name: str, message: str) -> Result:
    return Result(f"h::{name}", name, "hidden", "failed", 0, 2, message=message)


def card_with(tests: list[Result], tier: str = "premium", locked: list[LockedTest] | None = None) -> Scorecard:
    score = sum(t.score for t in tests)
    return Scorecard("continuous_batching", tier, "ab" * 32, "graded", score, sum(t.max_score for t in tests),
                     tests=tests, locked=locked or [], title="Scheduler")


def test_failures_with_one_cause_in_different_scenarios_are_one_group():
    tests = [
        failed("test_a", DECODE.format(step=3, rid=4, scenario="Scheduler(8, 2, 100)")),
        failed("test_b", "step 1: after add(), waiting is [] but should be [r0]"),
        failed("test_c", DECODE.format(step=12, rid=17, scenario="Scheduler(64, 9, 1000)")),
        Result("h::ok", "test_ok", "hidden", "passed", 2, 2),
        failed("test_d", DECODE.format(step=5, rid=2, scenario="another")),
    ]
    view = report_view(card_with(tests))
    groups = view["groups"]
    assert [[t["name"] for t in g["tests"]] for g in groups] == [["test_a", "test_c", "test_d"], ["test_b"]]
    assert groups[0]["cause"].startswith("step 3: expected plan")  # the first test's own words
    assert [t["same_as"] and t["same_as"]["name"] for t in view["tests"]] == [None, None, "test_a", None, "test_a"]


def test_a_reason_several_tests_meet_is_not_shown_under_the_first_ones_description():
    # What the first test of a group checks is often another rule than the one its failure breaks.
    release = "step {step}: reserved is {n} but should be 21: a finished request's reservation is released"
    tests = [Result(f"h::t{n}", f"test_{n}", "hidden", "failed", 0, 2, message=release.format(step=n, n=20 + n),
                    description=f"rule number {n} of the statement") for n in (1, 2)]
    tests.append(Result("h::alone", "test_alone", "hidden", "failed", 0, 2, message="add() accepted r7 twice",
                        description="a live id is refused"))
    md = render_markdown(card_with(tests))
    assert "*What it checks:* a live id is refused" in md
    assert "rule number 1" not in md and "reserved is 21 but should be 21" in md


def test_different_rules_or_statuses_are_different_causes():
    decode = {"message": "step 2: a decode gets exactly 1 token, but r3 got 2", "status": "failed"}
    budget = {"message": "step 2: the plan spends 9 tokens but token_budget is 8", "status": "failed"}
    assert cause_key(decode) == cause_key({**decode, "message": "step 40: a decode gets exactly 1 token, but r77 got 2"})
    assert cause_key(decode) != cause_key(budget)
    assert cause_key(decode) != cause_key({**decode, "status": "timeout"})
    # Tests without a message are never merged.
    views = [{"name": "x", "anchor": "t-x", "passed": False, "message": ""},
             {"name": "y", "anchor": "t-y", "passed": False, "message": ""}]
    assert len(failure_groups(views)) == 2


def test_grouped_failures_name_each_test_once_in_both_reports():
    tests = [failed(f"test_{i}", DECODE.format(step=i + 1, rid=i + 5, scenario=f"s{i}")) for i in range(16)]
    card = card_with(tests)
    page, md = render_html(card), render_markdown(card)
    assert "To fix (16 tests, 1 reason)" in page and "One reason, 16 tests:" in page
    assert page.count(" open>") == 1 and page.count("Fails for the same reason as") == 15
    assert "### What went wrong (16 tests, 1 reason)" in md
    assert md.count("#### ") == 1 and "*The same reason fails 15 more tests:*" in md
    wrong = md.split("### What went wrong")[1]  # the table of all tests above lists each test too
    for test in tests:
        assert wrong.count(f"`{test.name}`") == 1


def test_a_free_run_that_passes_says_what_it_did_not_check_and_never_well_done():
    passed = [Result(f"v::t{i}", f"test_{i}", "visible", "passed", 5, 5) for i in range(2)]
    locked = [LockedTest(f"test_hidden_{i}", "hidden", 2) for i in range(33)]
    free = card_with(passed, tier="free", locked=locked)
    page, md = render_html(free), render_markdown(free)
    for text in (page, md.replace("\\", "")):
        assert "well done" not in text
        assert "33 more tests (hidden, 66 points) did not run: 33 behaviours this report did not check" in text
    assert report_view(free)["tone"] != "good"
    full = card_with(passed)  # nothing locked: a full pass may be called one
    assert coverage(full)["complete"] and "well done" in render_html(full)
    assert report_view(full)["tone"] == "good"


def test_a_group_is_headed_by_the_test_that_shows_the_cause_most_directly():
    # One reader bug met by a generated sequence late and by a named test at its first call: the named
    # test leads (the fewest steps before the difference), the other is folded under it.
    why = "block_tokens({b}) should be [], yours raises KeyError (a block no sequence holds has reference count 0)"
    late = failed("test_random", f"at step 40, allocate(3, [1, 2]): {why.format(b=5)}.\nThis test checks a "
                                 f"generated sequence.\nReplay it:\n...")
    direct = failed("test_named", f"at step 1, allocate(1, [4]): {why.format(b=2)}.\nThis test checks rule 1.")
    view = report_view(card_with([late, direct]))
    (group,) = view["groups"]
    assert group["lead"]["name"] == "test_named" and group["cause"].startswith("at step 1, allocate(1, [4])")
    assert [t["name"] for t in group["tests"]] == ["test_named", "test_random"]
    assert {t["name"]: t["same_as"] and t["same_as"]["name"] for t in view["tests"]} == {
        "test_random": "test_named", "test_named": None}


def test_one_difference_met_at_different_calls_is_one_cause():
    # The block manager's first line: the call where the program and the reference part ways, then what
    # differs; a reader bug met after a free() in one test and an allocate() in another is one cause.
    why = "block_tokens(0) should be [], yours raises KeyError"
    tests = [failed("test_a", f"at step 1, free(7): {why}.\nReplay it:\nm.free(7)"),
             failed("test_b", f"at step 3, allocate(1, [1, 2]): {why}.\nThis test checks rule 4."),
             failed("test_c", "at step 3, allocate(1, [1, 2]): the call raises OutOfBlocks, but yours returns normally.")]
    assert [[t["name"] for t in g["tests"]] for g in report_view(card_with(tests))["groups"]] == [
        ["test_a", "test_b"], ["test_c"]]
