"""Exports of a scorecard for other platforms: pure functions of the `Scorecard`, each returning text.

- Gradescope `results.json` (https://gradescope-autograders.readthedocs.io/en/latest/specs/): a top-level
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
- PrairieLearn `results.json` (https://prairielearn.readthedocs.io/en/latest/externalGrading/): `score`
  as a fraction in [0, 1], `gradable` (false for invalid student input and for a run the grader could
  not vouch for: "invalid, not gradable", no points and no attempt used) with `format_errors`, `message`, `output`, `images` and `tests[]` with
  `name`, `description`, `points`, `max_points`, `message`, `output`, `images` (each `{label, url}`, the
  url a `data:` URL: here the trace timelines as SVG). `succeeded` and `max_points` as PrairieLearn's
  own Python grader writes them (false with score 0 when the grader failed; PrairieLearn's grader host
  reads results.json only when the entrypoint exits 0, so the bundle's entrypoint does whenever it
  wrote one, and the message says the run is no grade of the student's code). PrairieLearn shows the
  results at once and has no "after the due date": a test of a suite that is not `visible` (the same
  `suite_visibility` as for Gradescope) shows its name, pass or fail and points, never its message,
  output or images, and the diagnosis is left out when a held-back test failed.
  PrairieLearn keeps the whole object with the submission, so `provenance` (submission hash, grader
  version, exercise, tier) stays with it. The file must stay under 1 MB.
- JUnit XML valid against Jenkins' junit-10.xsd (the xUnit plugin's schema), as Jenkins and GitLab
  read it: `<testsuites name tests failures errors time>` of `<testsuite name tests failures errors
  skipped time timestamp file>` with `<properties>`, each `<testcase classname name time>` with
  `<failure message type>`, `<error message type>` or `<skipped message>`, and `<system-out>`. GitLab
  shows `classname` as the suite. A rejected submission is a failure, an `error` run an error.
  The `gitlab` format is the same document with GitLab's `file` on every `<testcase>` (the file GitLab
  shows beside a test), which junit-10.xsd does not allow: without it, the document validates.
"""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from markupsafe import escape

from grader.core.exercise import VISIBILITIES
from grader.core.scorecard import Scorecard, TestResult
from grader.diagnosis.words import card_diagnosis
from grader.report import (
    MESSAGE_LIMIT,
    OUTPUT_LIMIT,
    RUN_HELP,
    clip,
    clip_tail,
    md_code,
    md_fence,
    md_text,
    one_line,
    printable,
    result_text,
    result_view,
    run_text,
)
from grader.report.render import render_test_markdown, render_timeline_svg

HIDDEN_DEFAULT = "after_published"  # a suite outside the free tier that sets no visibility
WHEN_SHOWN = {"hidden": "are not shown to students", "after_due_date": "are shown after the due date",
              "after_published": "are shown once the grades are published", "visible": "are shown"}
# What a student reads on PrairieLearn in place of a held-back test's details.
HELD_DETAILS = "the details of this suite's tests are not shown"
PRAIRIELEARN_MAX_BYTES = 1_000_000
PRAIRIELEARN_IMAGE_BYTES = 200_000  # the largest timeline image kept
PRAIRIELEARN_SHRINK = (2_000, 500, 100, 0)  # characters of each test's message and output kept when too big


def _status(test: TestResult) -> str:
    return "passed" if test.status == "passed" else "failed"


def _message(test: TestResult) -> str:
    text, cut = clip(printable(test.message).strip("\n"), MESSAGE_LIMIT)
    return text + (f"\n… {cut:,} more characters not shown" if cut else "")


def _headline(card: Scorecard) -> str:
    if card.status == "rejected":
        return f"Not graded, the submission was rejected: {one_line(card.reason, 300)}"
    if card.status == "error":
        return f"Not graded, the grader could not vouch for a result: {one_line(card.reason, 300)}"
    passed = sum(t.status == "passed" for t in card.tests)
    return f"{card.score}/{card.max_score} points: {passed} of {len(card.tests)} tests passed"


def _provenance(card: Scorecard) -> dict[str, Any]:
    # `isolation` travels with the results: how a run was kept apart (namespaces, or an account of its
    # own inside the platform's container) is then read beside the score, not dug out of a log.
    return {"exercise": card.exercise, "tier": card.tier, "status": card.status,
            "submission_sha256": card.submission_sha256, "grader_version": card.grader_version,
            "schema_version": card.schema_version, "graded_at": card.graded_at, "isolation": card.isolation}


# -- Gradescope ---------------------------------------------------------------------------------------

def suite_visibility(card: Scorecard, hidden_visibility: str | None = None) -> dict[str, str]:
    """When Gradescope shows each suite of the card: `hidden_visibility` for every suite outside the
    free tier when given, else exercise.toml's setting, else `visible` for the free tier's suites and
    HIDDEN_DEFAULT for the others (also for a suite the card says nothing of: fail closed)."""
    if hidden_visibility is not None and hidden_visibility not in VISIBILITIES:
        raise ValueError(f"visibility {hidden_visibility!r} is not one of {', '.join(VISIBILITIES)}")
    names = dict.fromkeys([*card.open_suites, *card.suite_visibility, *(t.suite for t in card.tests),
                           *(t.suite for t in card.locked)])
    return {name: visibility_of(name, card.suite_visibility, card.open_suites, hidden_visibility) for name in names}


def visibility_of(suite: str, configured: dict[str, str], open_suites: list[str],
                  hidden_visibility: str | None = None) -> str:
    """One suite's visibility (suite_visibility's rule; `grader package` states it in points too)."""
    if hidden_visibility is not None and suite not in open_suites:
        return hidden_visibility
    if configured.get(suite) in VISIBILITIES:
        return configured[suite]
    return "visible" if suite in open_suites else HIDDEN_DEFAULT


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


def total_visibility(shown: dict[str, str]) -> str:
    """When the results as a whole (the total score, the top-level output) are shown: no sooner than
    the most held-back suite. Gradescope counts a hidden test's points in the total it shows unless the
    total is held back too (the top-level `visibility`); each test keeps its own, so the free tier's
    suites are still shown at once."""
    return min(shown.values(), key=VISIBILITIES.index, default="visible")


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
        "extra_data": {**_provenance(card), "max_score": card.max_score, "suite_visibility": shown},
        "tests": tests,
    }
    results = {"score": card.score if card.status == "graded" else 0, **results}
    return json.dumps(results, indent=2, ensure_ascii=False) + "\n"


# -- PrairieLearn -------------------------------------------------------------------------------------

def _svg_url(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _images(test: TestResult) -> list[dict[str, str]]:
    """The timeline of each trace artifact of a failed test, as an SVG data URL (one too large to be
    worth its place is left out: the step table in the output says the same)."""
    if test.status == "passed":
        return []
    images = []
    for artifact in test.artifacts:
        if isinstance(artifact, dict) and artifact.get("kind") == "trace":
            url = _svg_url(render_timeline_svg(artifact))
            if len(url) <= PRAIRIELEARN_IMAGE_BYTES:
                images.append({"label": f"{one_line(test.name, 120)}: {one_line(artifact.get('title', 'trace'), 80)}",
                               "url": url})
    return images


def _prairielearn_test(test: TestResult, shown: str) -> dict[str, Any]:
    """A test as PrairieLearn shows it. PrairieLearn shows external grading results at once, with no
    "after the due date": a test of a suite held back anywhere else (hidden, after_due_date,
    after_published) shows its name, pass or fail and points, never its message, output or timelines."""
    base = {"name": test.name, "description": one_line(test.description, 400) or f"a {test.suite} test",
            "points": test.score, "max_points": test.max_score}
    if shown != "visible":
        verdict = "passed" if test.status == "passed" else "did not pass"
        return {**base, "message": f"{verdict}; {HELD_DETAILS}", "output": "", "images": []}
    return {**base, "message": _message(test), "output": result_text(test, message=False), "images": _images(test)}


def prairielearn(card: Scorecard) -> str:
    graded = card.status == "graded"
    fraction = min(1.0, max(0.0, card.score / card.max_score)) if graded and card.max_score > 0 else 0.0
    shown = suite_visibility(card)
    tests = [_prairielearn_test(test, shown[test.suite]) for test in (card.tests if graded else [])]
    # A diagnosis drawn from a held-back suite's failures says what its messages would: only where every
    # test it could come from is shown.
    told = card if all(shown[t.suite] == "visible" for t in card.tests if t.status != "passed") else replace(
        card, diagnosis=[])
    results: dict[str, Any] = {
        "succeeded": card.status != "error",
        # Only a graded run counts: a rejected file or a run the grader could not vouch for is "invalid,
        # not gradable", so PrairieLearn records no 0 and the student keeps the attempt.
        "gradable": graded,
        "score": round(fraction, 6),
        "max_points": card.max_score,
        "message": _headline(card),
        "output": run_text(told),
        "tests": tests,
        "provenance": _provenance(card),
    }
    if card.status == "rejected":
        results["format_errors"] = [clip(printable(card.reason).strip(), 2_000)[0] or "the submission was rejected"]
    elif not graded:
        results["format_errors"] = [
            "the grader could not grade this submission, which is no judgement of your code: submit it again "
            f"({clip(printable(card.reason).strip(), 1_500)[0] or 'no reason given'})"]
    return _under_limit(results, tests)


def _under_limit(results: dict[str, Any], tests: list[dict[str, Any]]) -> str:
    """The results as JSON under PrairieLearn's 1 MB. Text comes first: without the images, every
    test's message and output are shortened alike until they fit; then the images go back, test by
    test in order, while they fit (the step tables in the output say what a timeline shows)."""
    def size() -> int:
        return len(json.dumps(results, indent=2, ensure_ascii=False).encode("utf-8"))

    budget = int(PRAIRIELEARN_MAX_BYTES * 0.95)
    images = [test["images"] for test in tests]
    for test in tests:
        test["images"] = []
    full = [(test["message"], test["output"]) for test in tests]
    for limit in PRAIRIELEARN_SHRINK:
        if size() <= budget:
            break
        for test, (message, output) in zip(tests, full):
            test["message"], test["output"] = _shorter(message, limit), _shorter(output, limit)
    room = budget - size()
    for test, kept in zip(tests, images):
        cost = len(json.dumps(kept, indent=2, ensure_ascii=False).encode("utf-8")) + 16 * len(kept)  # + indentation
        if kept and cost <= room:
            test["images"], room = kept, room - cost
    return json.dumps(results, indent=2, ensure_ascii=False) + "\n"


def _shorter(text: str, limit: int) -> str:
    kept, cut = clip(text, limit)
    return kept + (f"\n… {cut:,} more characters not shown (the results must stay under 1 MB)" if cut else "")


# -- JUnit XML ----------------------------------------------------------------------------------------

_XML_INVALID = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: Any) -> str:
    """Text that XML 1.0 can hold: control characters made visible, anything else it forbids removed."""
    return _XML_INVALID.sub("\ufffd", printable(text))


def _seconds(value: float) -> str:
    return f"{max(0.0, float(value or 0)):.3f}"


def _element(parent: ET.Element, tag: str, text: str | None = None, **attributes: Any) -> ET.Element:
    node = ET.SubElement(parent, tag, {key: xml_text(value) for key, value in attributes.items()})
    if text:
        node.text = xml_text(text)
    return node


def _properties(parent: ET.Element, card: Scorecard) -> None:
    properties = ET.SubElement(parent, "properties")
    for name, value in (("exercise", card.exercise), ("tier", card.tier), ("status", card.status),
                        ("score", card.score), ("max_score", card.max_score),
                        ("submission_sha256", card.submission_sha256), ("grader_version", card.grader_version)):
        _element(properties, "property", name=name, value=value)


def _timestamp(card: Scorecard) -> str:
    return card.graded_at[:19] if re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", card.graded_at or "") else ""


def junit(card: Scorecard, testcase_file: bool = False) -> str:
    """JUnit XML valid against junit-10.xsd; `testcase_file` adds GitLab's `file` to every <testcase>
    (GitLab shows it; the current Jenkins schema has no such attribute, so that flavour is its own format)."""
    root = ET.Element("testsuites", name=xml_text(card.exercise))
    case_file = {"file": card.submission_file} if testcase_file and card.submission_file else {}
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    extra = {key: value for key, value in (("timestamp", _timestamp(card)), ("file", card.submission_file)) if value}
    if card.status != "graded":
        # Rejected: the student's file failed a check before any test ran. Error: the grader failed.
        kind = "failure" if card.status == "rejected" else "error"
        counts: dict[str, Any] = {"tests": 1, "failures": int(kind == "failure"), "errors": int(kind == "error"), "skipped": 0}
        suite = _element(root, "testsuite", name=card.exercise, **counts, time=_seconds(card.duration_s), **extra)
        _properties(suite, card)
        case = _element(suite, "testcase", classname=f"{card.exercise}.submission", name="submission",
                        time=_seconds(card.duration_s), **case_file)
        _element(case, kind, run_text(card), message=one_line(card.reason, 500) or card.status, type=card.status)
        totals.update(tests=1, failures=counts["failures"], errors=counts["errors"], time=card.duration_s or 0.0)
    else:
        names = list(dict.fromkeys([*(t.suite for t in card.tests), *(t.suite for t in card.locked)]))
        for name in names:
            tests = [t for t in card.tests if t.suite == name]
            locked = [t for t in card.locked if t.suite == name]
            counts = {"tests": len(tests) + len(locked),
                      "failures": sum(t.status == "failed" for t in tests),
                      "errors": sum(t.status not in ("passed", "failed") for t in tests),
                      "time": sum(t.duration_s or 0.0 for t in tests)}
            suite = _element(root, "testsuite", name=f"{card.exercise}.{name}",
                             **{k: (_seconds(v) if k == "time" else v) for k, v in counts.items()},
                             skipped=len(locked), **extra)
            _properties(suite, card)
            for test in tests:
                case = _element(suite, "testcase", classname=f"{card.exercise}.{name}", name=test.name,
                                time=_seconds(test.duration_s), **case_file)
                if test.status != "passed":
                    kind = "failure" if test.status == "failed" else "error"
                    headline = one_line(next((line for line in printable(test.message).splitlines() if line.strip()),
                                             test.status), 500)
                    _element(case, kind, result_text(test), message=headline, type=test.status)
                if test.output:
                    output, _ = clip_tail(printable(test.output), OUTPUT_LIMIT)
                    _element(case, "system-out", output)
            for hidden in locked:
                case = _element(suite, "testcase", classname=f"{card.exercise}.{name}", name=hidden.name,
                                time=_seconds(0), **case_file)
                _element(case, "skipped", message=f"{card.suite_label(hidden.suite)}: not run on the {card.tier} tier")
            for key in totals:
                totals[key] += counts[key]
    for key, value in totals.items():  # junit-10.xsd has no `skipped` on <testsuites>: per suite only
        root.set(key, _seconds(value) if key == "time" else str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


EXPORTS: dict[str, Callable[[Scorecard], str]] = {
    "gradescope": gradescope,
    "prairielearn": prairielearn,
    "junit": junit,
    "gitlab": lambda card: junit(card, testcase_file=True),
}


def export(card: Scorecard, format: str, hidden_visibility: str | None = None) -> str:
    """The card in `format` (one of EXPORTS); `hidden_visibility` applies to Gradescope only."""
    if format == "gradescope":
        return gradescope(card, hidden_visibility)
    if hidden_visibility is not None:
        raise ValueError(f"--hidden-visibility applies to the gradescope format, not {format}")
    return EXPORTS[format](card)
