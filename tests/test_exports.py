"""Exports for other platforms, checked field by field against their published formats.

- Gradescope results.json: https://gradescope-autograders.readthedocs.io/en/latest/specs/
- PrairieLearn results.json: https://prairielearn.readthedocs.io/en/latest/externalGrading/ ("Grading results")
- JUnit XML as Jenkins (junit-10.xsd, vendored in tests/schemas/) and GitLab (unit test reports) read it.
"""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
import xmlschema
from markdown_it import MarkdownIt

from grader.cli import main
from grader.core.exercise import VISIBILITIES, ExerciseError, load_exercise
from grader.core.scorecard import LockedTest, Scorecard
from grader.core.scorecard import TestResult as Result
from grader.harness.feedback import Feedback
from grader.report.exports import EXPORTS, export, gradescope, junit, prairielearn, suite_visibility
from tests import golden
from tests.helpers import EXERCISE, mutant_file
from tests.test_exercise_data import FOLDER as COURSE_EXERCISE
from tests.test_exercise_data import course_copy

pytestmark = pytest.mark.unit

MUTANT = mutant_file("03_skip_blocked_head")
JUNIT_XSD = Path(__file__).parent / "schemas" / "junit-10.xsd"

GRADESCOPE_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
                  "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
GRADESCOPE_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                   "tags", "visibility", "extra_data"}
GRADESCOPE_FORMATS = {"text", "simple_format", "html", "md", "ansi"}
PRAIRIELEARN_TEST = {"name", "description", "points", "max_points", "message", "output", "images"}
HOSTILE = ("<script>alert(1)</script> <img src=x onerror=alert(1)> [link](javascript:alert(1)) "
           "```` </pre> **bold** \x00 \x1b[31m \x07 \ud800 \ufffe & ]]> end")


@pytest.fixture(scope="module")
def cards() -> dict[str, Scorecard]:
    # Real scorecards, graded once and kept (tests/golden/; tests/test_golden.py keeps them current).
    graded = {name: golden.load(case) for name, case in {
        "mutant": "mutant", "free": "reference_free", "rejected": "rejected_syntax"}.items()}
    graded["error"] = Scorecard(EXERCISE, "premium", "ef" * 32, "error", 0, 58, backend="docker",
                                reason="the grading harness ended without results (exit status 137)",
                                suite_visibility={"hidden": "after_published"}, open_suites=["visible"],
                                submission_file="scheduler.py")
    graded["every status"] = every_status()
    return graded


def every_status() -> Scorecard:
    feedback = Feedback()
    feedback.trace("plans", [[("r1", 2)], [("r1", 1)]], [[("r1", 2)], [("r1", 1), ("<b>r2</b>&", 3)]])
    feedback.table("values", ["a", "b"], [[1, HOSTILE], [3, None]], mark_row=1)
    tests = [
        Result("v::a", "test_a", "visible", "passed", 5, 5, duration_s=0.5, output="fine\n",
               description="adds one request"),
        Result("v::b", "test_b", "visible", "failed", 0, 5, message="wrong " + HOSTILE, duration_s=0.25,
               traceback=["line 3, in f: return 1", HOSTILE], output=HOSTILE, artifacts=feedback.artifacts,
               description="schedules " + HOSTILE),
        Result("h::c", "test_c", "hidden", "timeout", 0, 2, message="schedule() did not return within 5 s"),
        Result("h::d", "test_d", "hidden", "crashed", 0, 2, message="your code was killed: out of memory"),
        Result("h::e", "test_e", "hidden", "error", 0, 2, message="the test was skipped"),
    ]
    return Scorecard(EXERCISE, "premium", "ab" * 32, "graded", 5, 16, tests=tests, backend="local",
                     graded_at="2026-11-30T07:25:26+00:00", duration_s=2.6, grader_version="0.1.0",
                     suite_labels={"visible": "Visible tests", "hidden": "Premium tests"},
                     open_suites=["visible"], submission_file="scheduler.py")


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def rendered(markdown: str) -> str:
    """Markdown as a CommonMark renderer with raw HTML allowed (as Gradescope's md is) turns it into HTML."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


# What the Markdown of the exports makes, and nothing else: a submission's text never adds a tag or an attribute.
MARKDOWN_TAGS = {"h2", "p", "strong", "em", "code", "pre", "ul", "li", "blockquote", "hr",
                 "table", "thead", "tbody", "tr", "th", "td"}
MARKDOWN_ATTRIBUTES = {(), (("class", "language-text"),), (("style", "text-align:right"),)}


def markup_of(html: str) -> list[tuple[str, tuple]]:
    """Every tag (opening or closing) of `html` with its attributes; fails on unbalanced <pre>."""
    found: list[tuple[str, tuple]] = []

    class Collector(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, tuple(attrs)))

        def handle_endtag(self, tag):
            found.append((tag, ()))

    Collector().feed(html)
    assert sum(t == "pre" for t, _ in found) % 2 == 0, html
    return found


# -- Gradescope ---------------------------------------------------------------------------------------

def test_gradescope_results_use_only_documented_fields_with_their_types(cards):
    for name, card in cards.items():
        data = json.loads(gradescope(card))
        assert set(data) <= GRADESCOPE_TOP, (name, set(data) - GRADESCOPE_TOP)
        assert isinstance(data["execution_time"], int) and isinstance(data["output"], str) and data["output"]
        assert data["output_format"] == data["test_output_format"] == "md" and data["test_name_format"] == "text"
        assert data["visibility"] in VISIBILITIES and data["stdout_visibility"] == "hidden"
        assert isinstance(data["extra_data"], dict) and isinstance(data["tests"], list) and data["tests"]
        # The specification requires a score; every run has one at the top (0 unless graded).
        assert "score" in data and (data["score"] == 0 or card.status == "graded")
        for test in data["tests"]:
            assert set(test) <= GRADESCOPE_TEST, (name, set(test) - GRADESCOPE_TEST)
            assert isinstance(test["name"], str) and test.get("status", "failed") in ("passed", "failed")
            assert isinstance(test["output"], str) and test["output"].strip() and test["visibility"] in VISIBILITIES
            assert test["output_format"] in GRADESCOPE_FORMATS and test["name_format"] == "text"
            assert all(isinstance(tag, str) for tag in test.get("tags", []))
            if "score" in test:
                assert is_number(test["score"]) and is_number(test["max_score"])
                assert 0 <= test["score"] <= test["max_score"]


def test_gradescope_scores_and_outputs_match_the_scorecard(cards):
    card = cards["mutant"]
    data = json.loads(gradescope(card))
    data["tests"] = [t for t in data["tests"] if "diagnosis" not in t["tags"]]  # of no points: below
    assert data["score"] == card.score == sum(t["score"] for t in data["tests"])
    assert sum(t["max_score"] for t in data["tests"]) == card.max_score
    assert [t["name"] for t in data["tests"]] == [t.name for t in card.tests]
    for test, result in zip(data["tests"], card.tests):
        assert test["status"] == ("passed" if result.status == "passed" else "failed")
        assert test["output"].startswith(f"**{result.status}** · {result.score}/{result.max_score} points")
        if result.message:
            assert result.message.splitlines()[0] in test["output"]
        if any(a["kind"] == "trace" for a in result.artifacts):
            assert "⬅️ **first difference**" in test["output"]  # the step table, as the Markdown report has it
    card = cards["every status"]
    passed = json.loads(gradescope(card))["tests"][0]
    assert passed["status"] == "passed" and "*What it checks:* adds one request" in passed["output"]
    assert "fine" in passed["output"]  # what a passing test printed is kept too


def test_gradescope_visibility_is_set_per_suite_and_can_be_overridden(cards):
    card = cards["mutant"]
    assert card.suite_visibility == {"hidden": "after_published"} and card.open_suites == ["visible"]
    shown = {t["extra_data"]["suite"]: t["visibility"] for t in json.loads(gradescope(card))["tests"]
             if "diagnosis" not in t["tags"]}
    assert shown == {"visible": "visible", "hidden": "after_published"}
    for chosen in VISIBILITIES:
        data = json.loads(gradescope(card, hidden_visibility=chosen))
        shown = {t["extra_data"]["suite"]: t["visibility"] for t in data["tests"] if "diagnosis" not in t["tags"]}
        assert shown == {"visible": "visible", "hidden": chosen}  # the free tier's suite stays visible
        assert data["extra_data"]["suite_visibility"] == {"visible": "visible", "hidden": chosen}
    # A suite the card says nothing about is held back, not shown (fail closed); exercise.toml can open one.
    bare = Scorecard(EXERCISE, "premium", "00" * 32, "graded", 0, 4, tests=every_status().tests[2:4])
    assert suite_visibility(bare) == {"hidden": "after_published"}
    assert suite_visibility(Scorecard(**{**bare.__dict__, "suite_visibility": {"hidden": "visible"}})) == {
        "hidden": "visible"}
    with pytest.raises(ValueError, match="is not one of hidden, after_due_date, after_published, visible"):
        gradescope(card, hidden_visibility="later")


def test_gradescope_gives_the_diagnosis_no_sooner_than_the_tests_it_came_from(cards):
    card = cards["mutant"]
    assert card.diagnosis, "the mutant's failures look like its own misconception"
    for chosen in VISIBILITIES:
        data = json.loads(gradescope(card, hidden_visibility=chosen))
        told = [t for t in data["tests"] if "diagnosis" in t["tags"]]
        assert len(told) == 1 and "score" not in told[0] and told[0]["visibility"] == chosen
        assert told[0]["output"].startswith("Your program behaves like one that ")
        assert card.diagnosis[0].hint in told[0]["output"] and card.diagnosis[0].hint not in top_level(data)
    # A run with full marks or no diagnosis has no such entry.
    assert not any("diagnosis" in t["tags"] for t in json.loads(gradescope(cards["free"]))["tests"])


def top_level(data: dict) -> str:
    """What a student sees at once, whatever the tests' visibility: the top-level output, and the
    extra data stored with the results."""
    return data["output"] + json.dumps(data["extra_data"], ensure_ascii=False)


def test_a_held_back_suite_leaks_nothing_through_what_students_see_at_once(cards):
    card = cards["mutant"]
    hidden = [t for t in card.tests if t.suite == "hidden"]
    assert hidden and any(t.status != "passed" for t in hidden)
    for chosen in ("hidden", "after_due_date", "after_published"):
        data = json.loads(gradescope(card, hidden_visibility=chosen))
        seen = top_level(data)
        for test in hidden:
            assert test.name not in seen and (not test.message or test.message.splitlines()[0] not in seen)
        assert "| Premium tests |" not in data["output"]  # no per-suite score of the held-back suite
        assert f"{card.score}/{card.max_score}" not in data["output"]  # Gradescope hides the total too
        assert "Premium tests: the results of these" in data["output"]
    opened = json.loads(gradescope(card, hidden_visibility="visible"))
    assert f"{card.score}/{card.max_score} points" in opened["output"] and "| Premium tests |" in opened["output"]
    # The free tier lists the premium tests it did not run by name, in an entry held back like the suite.
    free = cards["free"]
    data = json.loads(gradescope(free))
    locked = [t for t in data["tests"] if "locked" in t["tags"]]
    assert len(locked) == 1 and locked[0]["visibility"] == "after_published" and "score" not in locked[0]
    assert all(f"`{t.name}`" in locked[0]["output"] for t in free.locked)
    assert not any(t.name in top_level(data) for t in free.locked)
    assert f"{len(free.locked)} tests worth {sum(t.max_score for t in free.locked)} points were not run" in data["output"]
    assert data["score"] == free.score == free.max_score


def test_gradescope_rejected_is_a_graded_zero_and_error_is_a_failed_run(cards):
    rejected = json.loads(gradescope(cards["rejected"]))
    assert rejected["score"] == 0 and rejected["extra_data"]["status"] == "rejected"
    [entry] = rejected["tests"]
    assert entry["score"] == 0 and entry["max_score"] == cards["rejected"].max_score and entry["status"] == "failed"
    assert "invalid syntax" in entry["output"] and "was rejected" in rejected["output"]
    assert "What to do next" in rejected["output"] and "python -m py_compile" in rejected["output"]
    error = json.loads(gradescope(cards["error"]))
    assert error["score"] == 0 and all("score" not in t and "max_score" not in t for t in error["tests"])
    assert error["extra_data"]["status"] == "error"
    assert "it is not a grade of your code" in error["output"] and cards["error"].reason in error["output"]
    assert "not a judgement of your code" in error["output"]


def test_gradescope_markdown_escapes_everything_from_the_submission(cards):
    card = cards["every status"]
    card = Scorecard(**{**card.__dict__, "title": "Title " + HOSTILE})
    data = json.loads(gradescope(card, hidden_visibility="visible"))
    texts = [data["output"], *(t["output"] for t in data["tests"])]
    assert "```` </pre>" in data["tests"][1]["output"]  # kept, as literal text in a longer fence
    for text in texts:
        tags = markup_of(rendered(text))
        assert {tag for tag, _ in tags} <= MARKDOWN_TAGS, tags  # no <script>, <img>, <b>, <a> from the submission
        assert {attrs for _, attrs in tags} <= MARKDOWN_ATTRIBUTES, tags
    for status in ("rejected", "error"):
        data = json.loads(gradescope(Scorecard(EXERCISE, "premium", "00" * 32, status, 0, 58, reason=HOSTILE)))
        for text in (data["output"], data["tests"][0]["output"]):
            html = rendered(text)
            assert {tag for tag, _ in markup_of(html)} <= MARKDOWN_TAGS and "&lt;script&gt;" in html
        assert "py_compile &lt;your file&gt;" in rendered(data["output"]) or status == "error"


# -- PrairieLearn -------------------------------------------------------------------------------------

def test_prairielearn_results_have_the_documented_fields_and_a_fractional_score(cards):
    for card in cards.values():
        data = json.loads(prairielearn(card))
        assert data["succeeded"] is (card.status != "error")
        # False for invalid student input and for a run nobody judged: no 0 recorded, no attempt used.
        assert data["gradable"] is (card.status == "graded")
        assert isinstance(data["score"], float) and 0.0 <= data["score"] <= 1.0
        assert isinstance(data["message"], str) and isinstance(data["output"], str)
        assert data["max_points"] == card.max_score
        assert data["provenance"] == {"exercise": card.exercise, "tier": card.tier, "status": card.status,
                                      "submission_sha256": card.submission_sha256,
                                      "grader_version": card.grader_version, "schema_version": 1,
                                      "graded_at": card.graded_at, "isolation": card.isolation}
        for test in data["tests"]:
            assert set(test) == PRAIRIELEARN_TEST
            assert all(isinstance(test[k], str) for k in ("name", "description", "message", "output"))
            assert isinstance(test["points"], int) and isinstance(test["max_points"], int)
            assert 0 <= test["points"] <= test["max_points"]
            assert all(set(image) == {"label", "url"} for image in test["images"])
        if card.status == "graded" and card.max_score:
            assert data["score"] == pytest.approx(card.score / card.max_score)
            assert sum(t["points"] for t in data["tests"]) == card.score
            assert "format_errors" not in data
        else:
            assert data["score"] == 0.0 and data["tests"] == [] and card.reason in data["output"]
            assert "format_errors" in data
            if card.status == "rejected":
                assert data["format_errors"] == [card.reason.strip()]
            else:
                assert "submit it again" in data["format_errors"][0] and card.reason in data["format_errors"][0]


def test_prairielearn_shows_each_trace_as_an_svg_timeline(cards):
    data = json.loads(prairielearn(cards["every status"]))
    images = {t["name"]: t["images"] for t in data["tests"]}
    assert images["test_a"] == [] and images["test_c"] == []
    [image] = images["test_b"]
    assert image["label"] == "test_b: plans" and image["url"].startswith("data:image/svg+xml;base64,")
    svg = ET.fromstring(base64.b64decode(image["url"].split(",", 1)[1]))  # well-formed: labels are escaped
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    texts = " ".join(node.text or "" for node in svg.iter())
    assert "first difference: step 2" in texts and "<b>r2</b>&" in texts
    opened = Scorecard(**{**cards["mutant"].__dict__, "suite_visibility": {"hidden": "visible"}})
    mutant = json.loads(prairielearn(opened))
    traced = [r for r in cards["mutant"].tests if r.status != "passed" and any(a["kind"] == "trace" for a in r.artifacts)]
    assert traced and all(t["images"] for t in mutant["tests"] if t["name"] in {r.name for r in traced})


def test_prairielearn_results_stay_under_one_megabyte():
    feedback = Feedback()
    steps = [[(f"r{i}", 3) for i in range(j % 12 + 1)] for j in range(60)]
    feedback.trace("plans", steps, steps[:-1] + [[("r0", 1)]])
    verbose = [Result(f"h::t{i}", f"test_{i}", "hidden", "failed", 0, 1, message="x" * 50_000, output="y" * 50_000)
               for i in range(200)]
    drawn = [Result(f"h::t{i}", f"test_{i}", "hidden", "failed", 0, 1, message="wrong plan", artifacts=feedback.artifacts)
             for i in range(40)]
    for tests in (verbose, drawn):
        text = prairielearn(Scorecard(EXERCISE, "premium", "00" * 32, "graded", 0, len(tests), tests=tests,
                                      suite_visibility={"hidden": "visible"}))
        assert len(text.encode("utf-8")) < 1_000_000
        data = json.loads(text)
        assert len(data["tests"]) == len(tests)
    # Text comes first; then as many timelines as fit, the first tests' first.
    with_images = [bool(t["images"]) for t in data["tests"]]
    assert with_images[0] and not with_images[-1] and with_images == sorted(with_images, reverse=True)
    assert all(t["message"] == "wrong plan" for t in data["tests"])


def test_prairielearn_shows_a_held_back_suite_by_pass_fail_and_points_only(cards):
    """PrairieLearn has no "after the due date": a suite held back anywhere else shows no details at once."""
    card = cards["mutant"]
    held = [t for t in card.tests if t.suite == "hidden" and t.status != "passed"]
    assert held and card.suite_visibility == {"hidden": "after_published"} and card.diagnosis
    for visibility in ("hidden", "after_due_date", "after_published"):
        data = json.loads(prairielearn(Scorecard(**{**card.__dict__, "suite_visibility": {"hidden": visibility}})))
        shown = {t["name"]: t for t in data["tests"]}
        for test in held:
            entry = shown[test.name]
            assert entry["points"] == test.score and entry["max_points"] == test.max_score
            assert entry["message"] == "did not pass; the details of this suite's tests are not shown"
            assert entry["output"] == "" and entry["images"] == []
            assert test.message.splitlines()[0] not in json.dumps(data)
        assert card.diagnosis[0].hint not in data["output"]  # drawn from the held-back failures
        visible = [t for t in card.tests if t.suite == "visible"]
        assert all(shown[t.name]["message"] == _plain_message(t) for t in visible)
    opened = json.loads(prairielearn(Scorecard(**{**card.__dict__, "suite_visibility": {"hidden": "visible"}})))
    assert held[0].message.splitlines()[0] in json.dumps(opened) and card.diagnosis[0].hint in opened["output"]


def _plain_message(test: Result) -> str:
    from grader.report.exports import _message

    return _message(test)


def test_both_platforms_record_the_isolation_a_run_had():
    card = Scorecard(**{**every_status().__dict__, "isolation": "account"})
    assert json.loads(gradescope(card))["extra_data"]["isolation"] == "account"
    assert json.loads(prairielearn(card))["provenance"]["isolation"] == "account"


def test_gradescope_holds_the_total_back_as_long_as_the_most_held_back_suite(cards):
    """Gradescope counts a held-back test's points in the total it shows unless the total is held back too."""
    card = cards["mutant"]
    for chosen in VISIBILITIES:
        data = json.loads(gradescope(card, hidden_visibility=chosen))
        assert data["visibility"] == chosen
        assert {t["visibility"] for t in data["tests"] if t["tags"] == ["visible"]} == {"visible"}
    # The free tier's total counts its own tests only: the locked ones' entry, of no points, holds nothing back.
    free = json.loads(gradescope(cards["free"]))
    assert free["visibility"] == "visible" and {t["visibility"] for t in free["tests"] if "locked" in t["tags"]} == {
        "after_published"}
    assert json.loads(gradescope(cards["error"]))["visibility"] == "visible"  # no points of any test in it


# -- JUnit --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def junit_schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(JUNIT_XSD))


def parse_junit(text: str) -> ET.Element:
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    root = ET.fromstring(text.encode("utf-8"))
    assert root.tag == "testsuites"
    return root


def test_junit_is_valid_against_jenkins_schema(cards, junit_schema):
    assert {"graded", "rejected", "error"} <= {card.status for card in cards.values()} and cards["free"].locked
    for name, card in cards.items():
        text = junit(card)
        errors = [str(error) for error in junit_schema.iter_errors(text)]
        assert errors == [], (name, errors)
    broken = junit(cards["free"]).replace("<testsuites ", '<testsuites skipped="3" ', 1)
    assert not junit_schema.is_valid(broken)  # the schema does catch what an earlier export wrote


def test_junit_names_the_submitted_file_on_each_suite(cards):
    for name, card in cards.items():
        for suite in parse_junit(junit(card)).findall("testsuite"):
            assert suite.get("file") == "scheduler.py", name


def test_gitlab_flavour_names_the_file_on_every_testcase_and_is_otherwise_the_valid_junit(cards, junit_schema):
    for name, card in cards.items():
        gitlab = EXPORTS["gitlab"](card)
        cases = parse_junit(gitlab).iter("testcase")
        assert all(case.get("file") == "scheduler.py" for case in cases), name
        assert not junit_schema.is_valid(gitlab)  # the attribute GitLab shows is outside Jenkins' schema...
        assert gitlab.replace(' file="scheduler.py"', "") == junit(card).replace(' file="scheduler.py"', "")
        assert junit_schema.is_valid(junit(card))  # ...which is why the Jenkins flavour leaves it out


def test_junit_counts_match_the_testcases_and_the_scorecard(cards):
    for name, card in cards.items():
        root = parse_junit(junit(card))
        totals = dict.fromkeys(("tests", "failures", "errors"), 0)
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
        assert {k: int(root.get(k)) for k in totals} == totals and root.get("skipped") is None
        if card.status == "graded":
            assert totals["tests"] == len(card.tests) + len(card.locked)
            assert totals["failures"] == sum(t.status == "failed" for t in card.tests)
            assert totals["errors"] == sum(t.status in ("timeout", "crashed", "error") for t in card.tests)


def test_junit_maps_each_status_and_keeps_the_details():
    card = every_status()
    root = parse_junit(junit(card))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert [s.get("name") for s in root.findall("testsuite")] == [f"{EXERCISE}.visible", f"{EXERCISE}.hidden"]
    assert cases["test_a"].find("failure") is None and cases["test_a"].find("system-out").text == "fine\n"
    failure = cases["test_b"].find("failure")
    assert failure.get("type") == "failed" and failure.get("message").startswith("wrong <script>")
    assert "<- first difference" in failure.text and "line 3, in f: return 1" in failure.text
    assert cases["test_b"].get("classname") == f"{EXERCISE}.visible" and cases["test_b"].get("time") == "0.250"
    for name, status in (("test_c", "timeout"), ("test_d", "crashed"), ("test_e", "error")):
        assert cases[name].find("error").get("type") == status
    # What XML cannot hold (NUL, ESC, BEL, a lone surrogate, U+FFFE) never makes the file unreadable.
    out = cases["test_b"].find("system-out").text
    assert "\u2400" in out and "\u2407" in out and "<script>alert(1)</script>" in out and "& ]]> end" in out


def test_junit_rejected_is_a_failure_and_error_an_error(cards):
    for name, kind in (("rejected", "failure"), ("error", "error")):
        card = cards[name]
        root = parse_junit(junit(card))
        suites = root.findall("testsuite")
        assert len(suites) == 1 and len(suites[0].findall("testcase")) == 1
        [case] = suites[0].findall("testcase")
        [outcome] = list(case)
        assert outcome.tag == kind and outcome.get("type") == card.status
        assert card.reason.splitlines()[0] in outcome.get("message") and card.reason in outcome.text
        assert root.get("failures") == str(int(kind == "failure")) and root.get("errors") == str(int(kind == "error"))


def test_junit_lists_locked_premium_tests_as_skipped(cards):
    card = cards["free"]
    root = parse_junit(junit(card))
    skipped = [c.get("name") for c in root.iter("testcase") if c.find("skipped") is not None]
    assert skipped == [t.name for t in card.locked]
    notes = [c.find("skipped").get("message") for c in root.iter("testcase") if c.find("skipped") is not None]
    assert notes and all(note == "Premium tests: not run on the free tier" for note in notes)
    assert sum(int(s.get("skipped")) for s in root.findall("testsuite")) == len(card.locked)


# -- exercise.toml and the command line ---------------------------------------------------------------

def test_a_suite_sets_its_visibility_in_exercise_toml(tmp_path):
    course = load_exercise(str(COURSE_EXERCISE))
    assert course.open_suites == ["warmup"] and course.suite_visibility == {}
    folder = course_copy(tmp_path, "details = false", 'details = false\nvisibility = "after_due_date"')
    exercise = load_exercise(str(folder))
    assert exercise.suite_visibility == {"exam": "after_due_date"}
    card = Scorecard("tiny_stats", "exam", "00" * 32, "graded", 0, 1, open_suites=exercise.open_suites,
                     suite_visibility=exercise.suite_visibility,
                     tests=[Result("e::x", "test_x", "exam", "failed", 0, 1), Result("w::y", "test_y", "warmup", "passed", 3, 3)])
    assert suite_visibility(card) == {"warmup": "visible", "exam": "after_due_date"}
    bad_folder = course_copy(tmp_path / "bad", "details = false", 'details = false\nvisibility = "soon"')
    with pytest.raises(ExerciseError) as caught:
        load_exercise(str(bad_folder))
    message = str(caught.value)
    assert "exercise.toml" in message and "[suites.exam]" in message and "'soon'" in message
    assert "hidden, after_due_date, after_published, visible" in message


def test_every_export_is_reachable_from_the_command_line(cards, tmp_path: Path, capsys):
    assert set(EXPORTS) == {"gradescope", "prairielearn", "junit", "gitlab"}
    path = tmp_path / "card.json"
    cards["mutant"].write(path)
    for name, function in EXPORTS.items():
        out = tmp_path / f"out.{name}"
        assert main(["export", str(path), "--format", name, "-o", str(out)]) == 0
        assert out.read_text(encoding="utf-8") == function(Scorecard.read(path)) == export(Scorecard.read(path), name)
    out = tmp_path / "hidden.json"
    assert main(["export", str(path), "--format", "gradescope", "--hidden-visibility", "hidden", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == gradescope(Scorecard.read(path), hidden_visibility="hidden")
    capsys.readouterr()
    assert main(["export", str(path), "--format", "junit", "--hidden-visibility", "hidden"]) == 2
    assert "--hidden-visibility applies to the gradescope format" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        main(["export", str(path), "--format", "gradescope", "--hidden-visibility", "later"])
    assert caught.value.code == 2


def test_a_scorecard_carries_what_the_exports_need_through_a_file(cards, tmp_path: Path):
    path = tmp_path / "card.json"
    cards["free"].write(path)
    card = Scorecard.read(path)
    assert card.submission_file == "scheduler.py" and card.open_suites == ["visible"]
    assert card.suite_visibility == {"hidden": "after_published"}
    assert card.locked and all(isinstance(t, LockedTest) for t in card.locked)
