"""Gradescope `results.json` (https://gradescope-autograders.readthedocs.io/en/latest/specs/): a top-level
`score` (it overrides the sum of the tests), `execution_time` in seconds, `output`, `output_format`,
`visibility`, `stdout_visibility`, `extra_data` and `tests[]` with `name`, `score`, `max_score`,
`status` ("passed"/"failed"), `output`, `tags`, `visibility`. A test's visibility is `hidden` (never
shown to students), `after_due_date`, `after_published` (once the grades are published) or `visible`;
Gradescope counts a held-back test's points in the total it shows unless the total is held back as
well, so the top-level `visibility` is that of the most held-back suite (each test keeps its own: the
free tier's are shown at once). Each suite has one (exercise.toml's
`visibility`, else `visible` for the free tier's suites and `after_published` for the others;
`hidden_visibility` overrides the suites that are not the free tier's), and nothing shown at once
(the top-level output and extra_data) names a held-back suite's tests or gives its scores.
Text is Markdown (`md`, which Gradescope renders with HTML allowed): every value from the submission
goes through the reports' Markdown filters, so it is escaped prose or sits in a code span or fence
it cannot break out of.
Every run has a top-level `score`, as the specification requires (a results.json without one is a
failed autograder run, which tells a student nothing): a rejected submission (the student's file was
refused: syntax error, wrong encoding) is a 0 with the reason; an `error` run (the grader cannot vouch
for a result) is a 0 whose output says it is no grade of the student's code and to submit again, and
none of its tests has a score, so nothing reads as a test failed. The grader's own account of an
error is the staff's (run_autograder's output, `stdout_visibility` hidden).
"""

from __future__ import annotations

import json
from typing import Any

from markupsafe import escape

from grader.core.exercise import VISIBILITIES
from grader.core.scorecard import Scorecard, TestResult
from grader.diagnosis.words import card_diagnosis
from grader.report import MESSAGE_LIMIT, RUN_HELP, clip, md_code, md_fence, md_text, one_line, printable, result_view
from grader.report.exports.shared import HIDDEN_DEFAULT, WHEN_SHOWN, provenance, suite_visibility, total_visibility
from grader.report.render import render_test_markdown


def _status(test: TestResult) -> str:
    return "passed" if test.status == "passed" else "failed"


def _gradescope_test(test: TestResult, visibility: str) -> dict[str, Any]:
    view = result_view(test)
    head = f"**{view['status_label']}** · {test.score}/{test.max_score} points · {view['duration']}"
    return {
        "name": test.name,
        "name_format": "text",
        "score": test.score,
        "max_score": test.max_score,
        "status": _status(test),
        "output": head + "\n\n" + render_test_markdown(view),
        "output_format": "md",
        "tags": [test.suite],
        "visibility": visibility,
        "extra_data": {"id": test.id, "suite": test.suite, "status": test.status, "duration_s": test.duration_s},
    }


def _gradescope_locked(card: Scorecard, suite: str, visibility: str) -> dict[str, Any]:
    """The tests of a suite this tier did not run, by name, as one entry without points: shown when
    the suite's own results would be."""
    tests = [t for t in card.locked if t.suite == suite]
    label = one_line(card.suite_label(suite), 80)
    lines = [f"The {md_text(card.tier)} tier does not run these {len(tests)} tests, worth "
             f"{sum(t.max_score for t in tests)} points; another tier does. Only their names are shown.", ""]
    lines += [f"- {md_code(t.name)}" for t in tests]
    return {"name": f"{label}: not run on the {one_line(card.tier, 40)} tier", "name_format": "text",
            "output": "\n".join(lines) + "\n", "output_format": "md", "tags": [suite, "locked"],
            "visibility": visibility, "extra_data": {"suite": suite, "locked": [t.name for t in tests]}}


def _run_help_md(card: Scorecard) -> list[str]:
    """Why a run was not graded, the reason (fenced) and what to do next, as Markdown lines."""
    help_ = RUN_HELP[card.status]  # the reports' own words, HTML-escaped as their templates escape them
    reason, cut = clip(printable(card.reason).strip("\n"), MESSAGE_LIMIT)
    lines = [f"> **{escape(help_['title'])}.** {escape(help_['text'])}", ""]
    if reason:
        lines += [md_fence(reason), *([f"*… {cut:,} more characters not shown*"] if cut else []), ""]
    return lines + ["**What to do next**", "", *(f"- {escape(tip)}" for tip in help_["tips"]), ""]


def _gradescope_output(card: Scorecard, shown: dict[str, str]) -> str:
    """The top-level output, which students see at once: the results of the suites shown at once,
    what is held back and until when (by label and count, never by test), and why a run was not graded."""
    title = md_text(card.title or card.exercise)
    footer = (f"*Submission id {md_code(card.submission_sha256)} · grader {md_text(card.grader_version)}*"
              if card.submission_sha256 else f"*grader {md_text(card.grader_version)}*")
    if card.status == "rejected":
        lines = [f"## {title}: 0/{card.max_score} points, the submission was rejected", ""]
        return "\n".join(lines + _run_help_md(card) + [footer]) + "\n"
    if card.status == "error":
        lines = [f"## {title}: not graded, the autograder could not produce a result", "",
                 "This run shows 0 points, but it is not a grade of your code: submit again.", ""]
        return "\n".join(lines + _run_help_md(card) + [footer]) + "\n"
    open_now = [name for name, row in card.suites.items() if shown.get(name) == "visible"]
    held = [name for name in card.suites if name not in open_now]
    if held:
        lines = [f"## {title}", ""]
    else:
        passed = sum(t.status == "passed" for t in card.tests)
        lines = [f"## {title}: {card.score}/{card.max_score} points", "",
                 f"{passed} of {len(card.tests)} tests passed.", ""]
    if open_now:
        lines += ["| Suite | Tests passed | Points |", "|---|---:|---:|"]
        for name in open_now:
            row = card.suites[name]
            lines.append(f"| {md_text(card.suite_label(name))} | {row['passed']}/{row['tests']} | "
                         f"{row['score']}/{row['max_score']} |")
        lines.append("")
    for name in held:
        lines += [f"{md_text(card.suite_label(name))}: the results of these {card.suites[name]['tests']} tests "
                  f"{WHEN_SHOWN[shown.get(name, HIDDEN_DEFAULT)]}.", ""]
    for suite in dict.fromkeys(t.suite for t in card.locked):
        tests = [t for t in card.locked if t.suite == suite]
        named = " Their names are listed below." if shown.get(suite) == "visible" else ""
        lines += [f"🔒 {md_text(card.suite_label(suite))}: {len(tests)} tests worth {sum(t.max_score for t in tests)} "
                  f"points were not run on the {md_text(card.tier)} tier.{named}", ""]
    return "\n".join(lines + [footer]) + "\n"


def _gradescope_diagnosis(card: Scorecard, shown: dict[str, str]) -> list[dict[str, Any]]:
    """The misconception the failures look like, as an entry of no points, shown no sooner than the
    most held-back suite the run's tests came from: a diagnosis drawn from hidden tests says no more,
    and no earlier, than they do."""
    sentence = card_diagnosis(card)
    if not sentence:
        return []
    visibility = min((shown[t.suite] for t in card.tests), key=VISIBILITIES.index, default="hidden")
    return [{"name": "A likely cause", "name_format": "text", "output": printable(sentence) + "\n",
             "output_format": "md", "tags": ["diagnosis"], "visibility": visibility}]


def gradescope(card: Scorecard, hidden_visibility: str | None = None) -> str:
    shown = suite_visibility(card, hidden_visibility)
    tests: list[dict[str, Any]] = []
    if card.status == "graded":
        tests = [_gradescope_test(test, shown[test.suite]) for test in card.tests]
        tests += [_gradescope_locked(card, suite, shown[suite]) for suite in dict.fromkeys(t.suite for t in card.locked)]
        tests += _gradescope_diagnosis(card, shown)
    elif card.status == "rejected":  # the student's file: a graded 0, with the reason where students look first
        tests = [{"name": "Submission rejected", "name_format": "text", "score": 0, "max_score": card.max_score,
                  "status": "failed", "output": md_fence(printable(card.reason)) + "\n", "output_format": "md",
                  "tags": ["rejected"], "visibility": "visible"}]
    else:  # error: no test has a score, so nothing reads as a test the student failed
        tests = [{"name": "Autograder failed: no result", "name_format": "text", "status": "failed",
                  "output": md_fence(printable(card.reason)) + "\n", "output_format": "md", "tags": ["error"],
                  "visibility": "visible"}]
    results: dict[str, Any] = {
        "execution_time": max(0, round(card.duration_s or 0)),
        "output": _gradescope_output(card, shown),
        "output_format": "md",
        "test_output_format": "md",
        "test_name_format": "text",
        # Only the suites whose points the total counts: a free tier's locked tests have none.
        "visibility": (total_visibility({t.suite: shown[t.suite] for t in card.tests}) if card.status == "graded"
                       else "visible"),
        "stdout_visibility": "hidden",
        "extra_data": {**provenance(card), "max_score": card.max_score, "suite_visibility": shown},
        "tests": tests,
    }
    results = {"score": card.score if card.status == "graded" else 0, **results}
    return json.dumps(results, indent=2, ensure_ascii=False) + "\n"
