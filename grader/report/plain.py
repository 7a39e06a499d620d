"""Plain text of a scorecard, for the exports (Gradescope, PrairieLearn, JUnit): a test's result,
its artifacts (a trace as an aligned table) and the whole run in a few lines."""

from __future__ import annotations

from typing import Any

from grader.core.scorecard import Scorecard, TestResult
from grader.report.trace import trace_rows
from grader.report.view import _repeats, artifact_view, report_view, result_view


def trace_text(artifact: dict[str, Any], before: int = 12, after: int = 3, width: int = 60) -> str:
    """A trace as an aligned text table around its first difference, the first difference marked."""
    t = trace_rows(artifact, before=before, after=after)

    def cut(text: str) -> str:
        return text if len(text) <= width else text[: width - 1] + "…"

    rows = [(str(row["step"]), cut(row["expected_text"]), cut(row["got_text"]), row["first"]) for row in t["rows"]]
    w1 = max([len("step"), *(len(r[0]) for r in rows)])
    w2 = max([len(t["expected_label"]), *(len(r[1]) for r in rows)])
    lines = [f"{t['title']}" + (f" (first difference at step {t['first_difference_step']})"
                                 if t["first_difference_step"] else ""),
             f"  {'step':>{w1}} | {t['expected_label']:<{w2}} | {t['got_label']}"]
    if t["hidden_before"]:
        lines.append(f"  {'…':>{w1}} | steps {t['first_step'] + 1}-{t['first_step'] + t['hidden_before']} agree")
    for step, want, have, first in rows:
        lines.append(f"{'>' if first else ' '} {step:>{w1}} | {want:<{w2}} | {have}"
                     + ("   <- first difference" if first else ""))
    if t["hidden_after"]:
        lines.append(f"  {'…':>{w1}} | {t['hidden_after']} later steps not listed")
    return "\n".join(lines)


def _cut_note(cut: int) -> str:
    return f"\n… {cut:,} more characters not shown" if cut else ""


def artifact_text(artifact: Any) -> str:
    """An artifact as plain text; a trace as an aligned table."""
    view = artifact_view(artifact)
    if view["kind"] == "text":
        return f"{view['title']}\n{view['body']}" + _cut_note(view["cut"])
    if view["kind"] == "table":
        lines = [view["title"], " | ".join(view["columns"])]
        lines += [("> " if i == view["mark_row"] else "") + " | ".join(row) for i, row in enumerate(view["rows"])]
        if view["truncated_rows"]:
            lines.append(f"… {view['truncated_rows']:,} more rows not shown")
        return "\n".join(lines)
    if view["kind"] == "trace":
        return trace_text(artifact)
    return ""


def result_text(test: TestResult, message: bool = True) -> str:
    """A test's feedback as plain text: the message, what to do about its status, the student's
    traceback, the end of the output and the artifacts, each clipped like in the reports."""
    view = result_view(test)
    parts = []
    if message and view["message"]:
        parts.append(view["message"] + _cut_note(view["message_cut"]))
    if view["help"]:
        tips = "\n".join(f"- {tip}" for tip in view["help"]["tips"])
        parts.append(f"{view['help']['title']}: {view['help']['text']}\n{tips}")
    if view["traceback"]:
        parts.append("Where, in your code:\n" + view["traceback_text"])
    if view["output"]:
        note = view["output_cut_note"] + "\n" if view["output_cut_note"] else ""
        parts.append(f"What your code printed (the end):\n{note}{view['output']}")
    for artifact in test.artifacts:
        if not _repeats(artifact, test.message) and (text := artifact_text(artifact)):
            parts.append(text)
    return "\n\n".join(parts)


def run_text(card: Scorecard) -> str:
    """The whole run in a few plain lines: score, suites, why a run was not graded and what to do,
    the tests of the suites this tier did not run."""
    view = report_view(card)
    lines = [f"{view['title']}: {card.score}/{card.max_score} points"
             + (f", {view['passed']} of {view['total']} tests passed" if view["graded"] else f" ({card.status})")]
    for suite in view["suites"]:
        lines.append(f"{suite['label']}: {suite['passed']}/{suite['tests']} passed, "
                     f"{suite['score']}/{suite['max_score']} points")
    if view["diagnosis"]:
        lines += ["", f"A likely cause: {view['diagnosis']}"]
    if view["run_help"]:
        lines += ["", f"{view['run_help']['title']}. {view['run_help']['text']}"]
        if view["reason"]:
            lines += ["Reason: " + view["reason"]]
        lines += ["What to do next:", *(f"- {tip}" for tip in view["run_help"]["tips"])]
    for group in view["locked_suites"]:
        lines += ["", f"{group['label']}, not run on the {view['tier']} tier ({len(group['tests'])} tests, "
                      f"{group['points']} points): " + ", ".join(group["tests"])]
    lines += ["", f"Submission id: {view['sha']}"]
    return "\n".join(lines)
