"""View data: everything the reports show, computed once from a scorecard as plain dicts of
strings and numbers (clipped and cleaned), which the templates only lay out. The dicts whose shape is
fixed are typed (`Help`, `LockedSuite`); a test's and the whole report's views stay plain dicts, which
the failure grouping (grader.course.grouping) extends."""

from __future__ import annotations

import math
from typing import Any, TypedDict

import grader
from grader.core.scorecard import Scorecard, TestResult
from grader.diagnosis.words import card_diagnosis
from grader.report.formatting import (
    MESSAGE_LIMIT,
    OUTPUT_LIMIT,
    REASON_LIMIT,
    TEXT_LIMIT,
    TRACEBACK_LINES,
    clip,
    clip_tail,
    one_line,
    percent,
    printable,
    short_duration,
    slug,
    when,
)
from grader.report.grouping import coverage, failure_groups
from grader.report.trace import timeline, trace_rows

# The words of the scorecard and the terminal summary, so every view names a result the same way.
STATUS_LABELS = {"passed": "passed", "failed": "failed", "timeout": "timeout", "crashed": "crashed", "error": "error"}
STATUS_EMOJI = {"passed": "✅", "failed": "❌", "timeout": "⏱️", "crashed": "💥", "error": "⚠️"}



class Help(TypedDict):
    """What a student can do about a kind of result: a heading, a paragraph and tips."""

    title: str
    text: str
    tips: list[str]


class LockedSuite(TypedDict):
    """A suite this tier did not run: its label, points and test names."""

    name: str
    label: str
    anchor: str
    points: int
    tests: list[str]


# What a student can do about each kind of result. "failed" needs no general advice: its message says
# what was expected and what the code did.
STATUS_HELP: dict[str, Help] = {
    "timeout": {
        "title": "Your code ran out of time",
        "text": "A call to your code, or the whole test, did not finish within its time limit (the "
                "message names the limit), so it was stopped.",
        "tips": [
            "Look for an endless loop: a while loop whose condition never becomes false, or a loop "
            "that never moves on to the next item.",
            "Look for a slow algorithm: nested loops over all the data on every call, or work "
            "repeated that could be done once.",
            "Run the failing scenario on your own machine and time it.",
        ],
    },
    "crashed": {
        "title": "The process running your code died",
        "text": "Your code ended the process before the test finished: it exited, was killed for "
                "using too much memory, or crashed the interpreter (segfault). The message names the cause.",
        "tips": [
            "Do not call exit(), sys.exit(), os._exit() or quit(), and do not kill processes.",
            "Keep memory modest: no huge lists, strings or runaway recursion (the message names the limit).",
            "Avoid ctypes, and do not leave processes or threads running.",
        ],
    },
    "error": {
        "title": "The grader could not judge this test",
        "text": "Something outside your code's answer went wrong (the test was skipped or could not "
                "be set up), so the grader cannot vouch for a result. It does not count as passed.",
        "tips": [
            "Submit again: a passing grade is never given for a test that was not judged.",
            "If it happens again, contact the course staff and quote the submission id of this report.",
        ],
    },
}

RUN_HELP: dict[str, Help] = {
    "rejected": {
        "title": "Your submission was not run",
        "text": "The grader refused the file before running any test, so the score is 0.",
        "tips": [
            "Fix the problem named above and submit again.",
            "Submit the Python source file of your solution itself (not a notebook, archive or "
            "screenshot), saved as UTF-8 text.",
            "Check that it compiles on your machine: python -m py_compile <your file>.",
        ],
    },
    "error": {
        "title": "The grader could not vouch for a result",
        "text": "Grading did not finish in a way the grader can trust, so no points were given. This "
                "is not a judgement of your code.",
        "tips": [
            "Submit again.",
            "If it happens again, contact the course staff and quote the submission id of this report.",
        ],
    },
}


def artifact_view(artifact: Any) -> dict[str, Any]:
    """One artifact ready to lay out; an unknown or malformed one becomes a short note."""
    if not isinstance(artifact, dict):
        return {"kind": "unknown", "title": "feedback"}
    kind = artifact.get("kind")
    title = one_line(artifact.get("title", kind or "feedback"), 120)
    if kind == "text":
        body, cut = clip(printable(artifact.get("body", "")), TEXT_LIMIT)
        return {"kind": "text", "title": title, "body": body, "cut": cut}
    if kind == "table":
        raw_columns, raw_rows = artifact.get("columns"), artifact.get("rows")
        columns = [one_line(c) for c in raw_columns] if isinstance(raw_columns, list) else []
        rows = [[one_line("" if c is None else c) for c in row] for row in raw_rows
                if isinstance(row, list)] if isinstance(raw_rows, list) else []
        width = max([len(columns), *(len(r) for r in rows)])
        columns += [""] * (width - len(columns))
        rows = [r + [""] * (width - len(r)) for r in rows]
        mark = artifact.get("mark_row")
        return {"kind": "table", "title": title, "columns": columns, "rows": rows,
                "mark_row": mark if isinstance(mark, int) and 0 <= mark < len(rows) else None,
                "truncated_rows": int(artifact.get("truncated_rows") or 0)}
    if kind == "trace":
        shown = trace_rows(artifact, before=12, after=3)
        full = trace_rows(artifact) if shown["hidden_before"] or shown["hidden_after"] else None
        return {"kind": "trace", "title": shown["title"], "table": shown, "full": full, "chart": timeline(artifact)}
    return {"kind": "unknown", "title": title}


def result_view(test: TestResult) -> dict[str, Any]:
    message, message_cut = clip(printable(test.message).strip("\n"), MESSAGE_LIMIT)
    output, output_cut = clip_tail(printable(test.output), OUTPUT_LIMIT)
    lines = [one_line(line, 400) for line in test.traceback]
    status = test.status if test.status in STATUS_LABELS else "error"
    return {
        "id": test.id,
        "anchor": "t-" + slug(test.id or test.name),
        "name": one_line(test.name, 200),
        "suite": test.suite,
        "status": status,
        "status_label": STATUS_LABELS[status],
        "emoji": STATUS_EMOJI[status],
        "passed": status == "passed",
        "score": test.score,
        "max_score": test.max_score,
        "description": one_line(test.description, 400),
        "message": message,
        "message_cut": message_cut,
        "headline": one_line(next((line for line in message.split("\n") if line.strip()), ""), 160),
        "traceback": lines[-TRACEBACK_LINES:],
        "traceback_text": "\n".join(lines[-TRACEBACK_LINES:]),
        "traceback_cut": max(0, len(lines) - TRACEBACK_LINES),
        "output": output,
        "output_cut_note": _output_cut_note(output_cut, int(test.output_cut or 0)),
        "duration": short_duration(test.duration_s or 0.0),
        "cpu_wait_note": cpu_wait_note(float(test.cpu_wait_s or 0.0)),
        "help": STATUS_HELP.get(status),
        "artifacts": [artifact_view(a) for a in test.artifacts if not _repeats(a, test.message)],
    }


def cpu_wait_note(seconds: float) -> str:
    """Said where the machine was busy enough to move a test's time limits: the grade did not depend
    on it (time spent waiting for a CPU is not the submission's)."""
    if seconds < 0.5:
        return ""
    return (f"The machine was busy during this test: {short_duration(seconds)} spent waiting for a CPU "
            "was not counted against its time limits.")


def _repeats(artifact: Any, message: str) -> bool:
    """A text artifact whose body the message already quotes in full (a test often puts the scenario
    in both): shown once."""
    if not isinstance(artifact, dict) or artifact.get("kind") != "text":
        return False
    body = str(artifact.get("body", "")).strip()
    return bool(body) and body in message


def _output_cut_note(chars: int, harness_bytes: int) -> str:
    """How much of the start of the output is not shown: the harness keeps a tail (counted in bytes),
    the report may shorten it further (counted in characters)."""
    parts = []
    if harness_bytes > 0:
        parts.append(f"{harness_bytes:,} bytes")
    if chars > 0:
        parts.append(f"{chars:,} more characters" if parts else f"{chars:,} characters")
    return f"… {' and '.join(parts)} printed before this not shown" if parts else ""


def diagnosis_view(card: Scorecard) -> str:
    """The misconception the run's failures look like, as a sentence; "" for none. Only a graded run
    below full marks is ever told one, whatever a stored card holds."""
    return one_line(card_diagnosis(card), 1000)


def report_view(card: Scorecard, held: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything both reports show, computed once from the scorecard. `held`: what a student is told
    of the results withheld until release (grader.web.release: tests, points, sentence), the card then
    holding only the open suites' results; the report then shows no total and never calls it complete."""
    tests = [result_view(t) for t in card.tests]
    if held is not None:  # the card holds no time then (grader.web.release.withheld): none is shown either
        for test in tests:
            test["duration"], test["cpu_wait_note"] = "", ""
    groups = failure_groups(tests)  # the failing ones by cause; marks repeats with `same_as`
    covered = coverage(card)
    if held is not None:
        covered = {**covered, "complete": False}
    pct = percent(card.score, card.max_score)
    graded = card.status == "graded"
    suites = []
    for name, row in card.suites.items():
        suites.append({**row, "name": name, "label": one_line(card.suite_label(name), 80),
                       "percent": percent(row["score"], row["max_score"]), "anchor": "suite-" + slug(name),
                       "tests_view": [t for t in tests if t["suite"] == name]})
    counts = {status: sum(t["status"] == status for t in tests) for status in STATUS_LABELS}
    reason, reason_cut = clip(printable(card.reason).strip("\n"), REASON_LIMIT)
    ring_r = 44.0
    circumference = 2 * math.pi * ring_r
    if not graded or held is not None:
        tone = "muted"
    elif pct == 100 and covered["complete"]:
        tone = "good"
    elif pct >= 50:
        tone = "fair"
    else:
        tone = "poor"
    return {
        "title": one_line(card.title or card.exercise, 200),
        "exercise": one_line(card.exercise, 100),
        "tier": one_line(card.tier, 40),
        "status": card.status,
        "graded": graded,
        "score": card.score,
        "max_score": card.max_score,
        "percent": pct,
        "tone": tone,
        "ring": {"r": ring_r, "c": round(circumference, 3),
                 "dash": round(circumference * (pct / 100 if graded and held is None else 0), 3)},
        "reason": reason,
        "reason_cut": reason_cut,
        "run_help": RUN_HELP.get(card.status),
        "suites": suites,
        "tests": tests,
        "failing": [t for t in tests if not t["passed"]],
        "groups": groups,
        "coverage": covered,
        "counts": counts,
        "passed": counts["passed"],
        "total": len(tests),
        "locked": [{"name": one_line(t.name, 200), "suite": t.suite, "max_score": t.max_score} for t in card.locked],
        "locked_points": sum(t.max_score for t in card.locked),
        "locked_suites": locked_suites(card),
        "diagnosis": diagnosis_view(card) if held is None else "",
        "held": held,
        "backend": one_line(card.backend, 40),
        "isolation": ISOLATION_NOTES.get(card.isolation, one_line(card.isolation, 40)),
        "graded_at": when(card.graded_at) if card.graded_at else "",
        "duration": short_duration(card.duration_s) if card.duration_s and held is None else "",
        "sha": one_line(card.submission_sha256, 64),
        "seed": card.seed,
        "grader_version": one_line(card.grader_version or grader.__version__, 40),
        "schema_version": card.schema_version,
        "limits": {"message": MESSAGE_LIMIT, "output": OUTPUT_LIMIT},
    }


# How the submission was kept apart, as a report's reader (an instructor, mostly) reads it.
ISOLATION_NOTES = {
    "namespaces": "",  # the local sandbox's usual isolation: nothing to say
    "container": "",  # the Docker sandbox's
    "account": "isolated as an account of its own (the container allowed no namespaces)",
    "none": "NOT isolated (--unsafe-local)",
}


def locked_suites(card: Scorecard) -> list[LockedSuite]:
    """The suites this tier did not run, each with its label, points and test names, in card order."""
    groups: dict[str, LockedSuite] = {}
    for test in card.locked:
        group = groups.setdefault(test.suite, LockedSuite(name=test.suite, label=one_line(card.suite_label(test.suite), 80),
                                                          anchor="locked-" + slug(test.suite), points=0, tests=[]))
        group["points"] += test.max_score
        group["tests"].append(one_line(test.name, 200))
    return list(groups.values())
