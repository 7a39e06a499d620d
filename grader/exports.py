"""Exports of a scorecard for other platforms: pure functions of the `Scorecard`, each returning text.

- Gradescope `results.json` (https://gradescope-autograders.readthedocs.io/en/latest/specs/): a top-level
  `score` (it overrides the sum of the tests), `execution_time` in seconds, `output`, `output_format`,
  `visibility`, `stdout_visibility`, `extra_data` and `tests[]` with `name`, `score`, `max_score`,
  `status` ("passed"/"failed"), `output`, `tags`, `visibility`. Every text is sent with the "text"
  format: the default top-level format ("simple_format") renders HTML, which a submission's
  output must never become.
- PrairieLearn `results.json` (https://prairielearn.readthedocs.io/en/latest/externalGrading/): `gradable`
  (false: "invalid, not gradable", no points and no attempt used), `score` as a fraction in [0, 1],
  `message`, `output`, `format_errors` for an ungradable submission, and `tests[]` with `name`,
  `description`, `points`, `max_points`, `message`, `output`; the file must stay under 1 MB.
- JUnit XML as Jenkins and GitLab read it: `<testsuites>` of `<testsuite name tests failures errors
  skipped time>`, each `<testcase classname name time>` with `<failure message type>`, `<error
  message type>` or `<skipped message>`, and `<system-out>`. GitLab shows `classname` as the suite.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from grader.report import MESSAGE_LIMIT, OUTPUT_LIMIT, clip, clip_tail, one_line, printable, run_text, result_text
from grader.scorecard import Scorecard, TestResult

PRAIRIELEARN_MAX_BYTES = 1_000_000
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


# -- Gradescope ---------------------------------------------------------------------------------------

def gradescope(card: Scorecard) -> str:
    graded = card.status == "graded"
    tests: list[dict[str, Any]] = []
    for test in card.tests if graded else []:
        tests.append({
            "name": test.name,
            "score": test.score,
            "max_score": test.max_score,
            "status": _status(test),
            "output": result_text(test),
            "output_format": "text",
            "name_format": "text",
            "tags": [test.suite],
            "visibility": "visible",
            "extra_data": {"id": test.id, "status": test.status, "duration_s": test.duration_s},
        })
    if not graded:
        # An informational check (no score) that says why in the list students look at first.
        tests.append({"name": "Submission not graded", "status": "failed", "output": run_text(card),
                      "output_format": "text", "name_format": "text", "tags": [card.status], "visibility": "visible"})
    results = {
        "score": card.score if graded else 0,
        "execution_time": max(0, round(card.duration_s or 0)),
        "output": run_text(card),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {
            "exercise": card.exercise, "tier": card.tier, "status": card.status, "max_score": card.max_score,
            "submission_sha256": card.submission_sha256, "schema_version": card.schema_version,
            "grader_version": card.grader_version, "locked": [t.name for t in card.locked],
        },
        "tests": tests,
    }
    return json.dumps(results, indent=2, ensure_ascii=False) + "\n"


# -- PrairieLearn -------------------------------------------------------------------------------------

def prairielearn(card: Scorecard) -> str:
    graded = card.status == "graded"
    fraction = min(1.0, max(0.0, card.score / card.max_score)) if graded and card.max_score > 0 else 0.0
    tests = [{
        "name": test.name,
        "description": one_line(test.description, 400) or f"a {test.suite} test",
        "points": test.score,
        "max_points": test.max_score,
        "message": _message(test),
        "output": result_text(test, message=False),
    } for test in (card.tests if graded else [])]
    results: dict[str, Any] = {
        "gradable": graded,
        "score": round(fraction, 6),
        "message": _headline(card),
        "output": run_text(card),
        "tests": tests,
    }
    if not graded:
        results["format_errors"] = [clip(printable(card.reason).strip(), 2_000)[0] or f"the run ended as {card.status}"]
    text = json.dumps(results, indent=2, ensure_ascii=False)
    full = [(test["message"], test["output"]) for test in tests]
    for limit in PRAIRIELEARN_SHRINK:  # PrairieLearn takes at most 1 MB: shorten every test alike until it fits
        if len(text.encode("utf-8")) <= PRAIRIELEARN_MAX_BYTES * 0.95:
            break
        for test, (message, output) in zip(tests, full):
            test["message"], test["output"] = _shorter(message, limit), _shorter(output, limit)
        text = json.dumps(results, indent=2, ensure_ascii=False)
    return text + "\n"


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


def junit(card: Scorecard) -> str:
    root = ET.Element("testsuites", name=xml_text(card.exercise))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    stamp = {"timestamp": _timestamp(card)} if _timestamp(card) else {}
    if card.status != "graded":
        suite = _element(root, "testsuite", name=card.exercise, tests=1, failures=0, errors=1, skipped=0,
                         time=_seconds(card.duration_s), **stamp)
        _properties(suite, card)
        case = _element(suite, "testcase", classname=f"{card.exercise}.submission", name="submission",
                        time=_seconds(card.duration_s))
        _element(case, "error", run_text(card), message=one_line(card.reason, 500) or card.status, type=card.status)
        totals.update(tests=1, errors=1, time=card.duration_s or 0.0)
    else:
        names = list(dict.fromkeys([*(t.suite for t in card.tests), *(t.suite for t in card.locked)]))
        for name in names:
            tests = [t for t in card.tests if t.suite == name]
            locked = [t for t in card.locked if t.suite == name]
            counts = {"tests": len(tests) + len(locked),
                      "failures": sum(t.status == "failed" for t in tests),
                      "errors": sum(t.status not in ("passed", "failed") for t in tests),
                      "skipped": len(locked),
                      "time": sum(t.duration_s or 0.0 for t in tests)}
            suite = _element(root, "testsuite", name=f"{card.exercise}.{name}",
                             **{k: (_seconds(v) if k == "time" else v) for k, v in counts.items()},
                             **stamp)
            _properties(suite, card)
            for test in tests:
                case = _element(suite, "testcase", classname=f"{card.exercise}.{name}", name=test.name,
                                time=_seconds(test.duration_s))
                if test.status != "passed":
                    kind = "failure" if test.status == "failed" else "error"
                    headline = one_line(next((line for line in printable(test.message).splitlines() if line.strip()),
                                             test.status), 500)
                    _element(case, kind, result_text(test), message=headline, type=test.status)
                if test.output:
                    output, _ = clip_tail(printable(test.output), OUTPUT_LIMIT)
                    _element(case, "system-out", output)
            for test in locked:
                case = _element(suite, "testcase", classname=f"{card.exercise}.{name}", name=test.name,
                                time=_seconds(0))
                _element(case, "skipped", message=f"{card.suite_label(test.suite)}: not run on the {card.tier} tier")
            for key in totals:
                totals[key] += counts[key]
    for key, value in totals.items():
        root.set(key, _seconds(value) if key == "time" else str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


EXPORTS: dict[str, Callable[[Scorecard], str]] = {
    "gradescope": gradescope,
    "prairielearn": prairielearn,
    "junit": junit,
}
