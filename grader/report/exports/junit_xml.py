"""JUnit XML valid against Jenkins' junit-10.xsd (the xUnit plugin's schema), as Jenkins and GitLab
read it: `<testsuites name tests failures errors time>` of `<testsuite name tests failures errors
skipped time timestamp file>` with `<properties>`, each `<testcase classname name time>` with
`<failure message type>`, `<error message type>` or `<skipped message>`, and `<system-out>`. GitLab
shows `classname` as the suite. A rejected submission is a failure, an `error` run an error.
The `gitlab` format is the same document with GitLab's `file` on every `<testcase>` (the file GitLab
shows beside a test), which junit-10.xsd does not allow: without it, the document validates.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from grader.core.scorecard import Scorecard
from grader.report import OUTPUT_LIMIT, clip_tail, one_line, printable, result_text, run_text

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
