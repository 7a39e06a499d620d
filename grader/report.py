"""Feedback reports of a scorecard: one self-contained HTML page and Markdown (LMS comments, pull requests).

Everything here is a function of the `Scorecard` alone. The functions compute view data (plain dicts
of strings and numbers: what to show, clipped and cleaned); the Jinja templates in `templates/` only
lay it out. Both environments escape by default, submission text is only ever a template *value*
(never a template), and the Markdown filters keep submission text inside code spans and fences it
cannot break out of.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

import grader
from grader.scorecard import Scorecard, TestResult

MESSAGE_LIMIT = 4_000   # characters of a test's message shown
OUTPUT_LIMIT = 8_000    # characters of the output tail shown
TEXT_LIMIT = 8_000      # characters of a text artifact's body shown
REASON_LIMIT = 4_000    # characters of a run's rejection/error reason shown
CELL_LIMIT = 200        # characters of one table cell or trace label
TRACEBACK_LINES = 40    # the last lines of the student's traceback shown
LEGEND_LIMIT = 24       # labels named in a timeline's legend
CHART_STEPS = 200       # steps a timeline draws at most
CHART_AFTER = 6         # steps a timeline draws after the first difference

# The words of the scorecard and the terminal summary, so every view names a result the same way.
STATUS_LABELS = {"passed": "passed", "failed": "failed", "timeout": "timeout", "crashed": "crashed", "error": "error"}
STATUS_EMOJI = {"passed": "✅", "failed": "❌", "timeout": "⏱️", "crashed": "💥", "error": "⚠️"}

# What a student can do about each kind of result. "failed" needs no general advice: its message says
# what was expected and what the code did.
STATUS_HELP: dict[str, dict[str, Any]] = {
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

RUN_HELP: dict[str, dict[str, Any]] = {
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

# Label colours of the trace timeline: distinct, readable on white and on dark backgrounds.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2",
           "#ff9da7", "#9c755f", "#e15759", "#86bcb6", "#8cd17d", "#d4a6c8")


# -- text helpers ---------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f]")
_CONTROLS = {**{i: chr(0x2400 + i) for i in range(0x20) if chr(i) not in "\n\t"}, 0x7F: "\u2421",
             **{i: "\ufffd" for i in range(0x80, 0xA0)}}


def printable(text: Any) -> str:
    """Text as it can be shown anywhere: no ANSI colour codes, control characters made visible
    (U+2400 pictures), bidirectional overrides (which make text read other than it is) named, lone
    surrogates replaced; newlines and tabs kept."""
    text = str(text)
    text = _SURROGATE.sub("\ufffd", text)
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)
    return text.translate(_CONTROLS)


def clip(text: str, limit: int) -> tuple[str, int]:
    """The first `limit` characters of `text`, and how many were cut after them."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def clip_tail(text: str, limit: int) -> tuple[str, int]:
    """The last `limit` characters of `text`, and how many were cut before them."""
    if len(text) <= limit:
        return text, 0
    return text[len(text) - limit:], len(text) - limit


def one_line(text: Any, limit: int = CELL_LIMIT) -> str:
    """Cleaned text on one line, at most `limit` characters (an ellipsis marks a cut)."""
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def percent(score: float, max_score: float) -> int:
    if max_score <= 0:
        return 0
    return max(0, min(100, math.floor(100 * score / max_score)))


def short_duration(seconds: float) -> str:
    if seconds < 0.001:
        return "<1 ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s" if seconds < 100 else f"{seconds:.0f} s"


def when(stamp: str) -> str:
    """An ISO timestamp as '2026-11-30 07:25 UTC' (left as it is when it does not parse)."""
    try:
        moment = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return one_line(stamp or "", 40)
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
        return moment.strftime("%Y-%m-%d %H:%M UTC")
    return moment.strftime("%Y-%m-%d %H:%M")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:80] or "x"


# -- traces -----------------------------------------------------------------------------------------

def _segments(step: Any) -> list[tuple[str, int]]:
    out = []
    for seg in step if isinstance(step, list) else []:
        if isinstance(seg, (list, tuple)) and len(seg) == 2:
            try:
                out.append((one_line(seg[0], 40), int(seg[1])))
            except (TypeError, ValueError):
                continue
    return out


def _steps(value: Any) -> list[list[tuple[str, int]]]:
    return [_segments(step) for step in value] if isinstance(value, list) else []


def step_text(step: list[tuple[str, int]] | None) -> str:
    """One step of a trace as text: 'r1: 49, r3: 23'; '(nothing)' for an empty step; '(no step)' for
    a step one side never reached."""
    if step is None:
        return "(no step)"
    if not step:
        return "(nothing)"
    return ", ".join(f"{label}: {amount}" for label, amount in step)


def label_colours(expected: list[list[tuple[str, int]]], got: list[list[tuple[str, int]]]) -> dict[str, str]:
    """One colour per label, in order of first appearance, the same on both sides."""
    colours: dict[str, str] = {}
    for step in (*expected, *got):
        for label, _ in step:
            if label not in colours:
                colours[label] = PALETTE[len(colours) % len(PALETTE)]
    return colours


def trace_data(artifact: dict[str, Any]) -> dict[str, Any]:
    """A trace artifact, cleaned: steps on both sides, their offset, the first difference (index into
    the steps shown, or None), and the colour of each label."""
    expected, got = _steps(artifact.get("expected")), _steps(artifact.get("got"))
    first_step = artifact.get("first_step") if isinstance(artifact.get("first_step"), int) else 0
    diff = artifact.get("first_difference")
    count = max(len(expected), len(got), 1)
    local = diff - first_step if isinstance(diff, int) and 0 <= diff - first_step < count else None
    return {
        "title": one_line(artifact.get("title", "trace"), 120),
        "expected_label": one_line(artifact.get("expected_label", "expected"), 40),
        "got_label": one_line(artifact.get("got_label", "got"), 40),
        "unit": one_line(artifact.get("unit", ""), 30),
        "expected": expected,
        "got": got,
        "first_step": max(0, first_step),
        "first_difference": local,
        "colours": label_colours(expected, got),
    }


def trace_rows(artifact: dict[str, Any], before: int | None = None, after: int = 3) -> dict[str, Any]:
    """The step-by-step table of a trace: one row per step (1-based step numbers as the messages
    count them), each side's segments, whether the step differs and which one is the first difference.

    With `before` set, only a window is kept: up to `before` steps before the first difference and
    `after` steps after it; `hidden_before`/`hidden_after` count the steps left out.
    """
    data = trace_data(artifact)
    expected, got, first = data["expected"], data["got"], data["first_difference"]
    count = max(len(expected), len(got))
    start, stop = 0, count
    if before is not None and first is not None:
        start, stop = max(0, first - before), min(count, first + after + 1)
    elif before is not None:
        stop = min(count, before + after + 1)
    rows = []
    for i in range(start, stop):
        want = expected[i] if i < len(expected) else None
        have = got[i] if i < len(got) else None
        rows.append({
            "step": data["first_step"] + i + 1,
            "expected": want,
            "got": have,
            "expected_text": step_text(want),
            "got_text": step_text(have),
            "expected_marks": _marks(want, have),
            "got_marks": _marks(have, want),
            "differs": want != have,
            "first": i == first,
        })
    return {**data, "rows": rows, "count": count, "hidden_before": start, "hidden_after": count - stop,
            "first_difference_step": None if first is None else data["first_step"] + first + 1}


def _marks(side: list[tuple[str, int]] | None, other: list[tuple[str, int]] | None) -> list[bool]:
    """Per segment of `side`: True when the other side has no equal segment at that position."""
    if side is None:
        return []
    other = other or []
    return [i >= len(other) or other[i] != seg for i, seg in enumerate(side)]


def _nice_ceiling(value: float) -> int:
    if value <= 1:
        return 1
    magnitude = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * magnitude >= value:
            return int(math.ceil(factor * magnitude))
    return int(10 * magnitude)


def timeline(artifact: dict[str, Any]) -> dict[str, Any]:
    """Geometry of the inline SVG timeline of a trace: per step, the amounts per label as two stacked
    bars side by side (expected on the left, drawn lighter; got on the right, solid), a band and a
    caption on the first difference, step numbers on the x axis, amounts on the y axis.

    The drawing covers the steps up to a few after the first difference (at most CHART_STEPS of them,
    ending there), so the difference sits at its right end. Bars shrink with the number of steps, down
    to 3 px, and the page shows the drawing in a box that scrolls sideways and starts at its right end.
    """
    data = trace_data(artifact)
    expected, got, first = data["expected"], data["got"], data["first_difference"]
    count = max(len(expected), len(got), 1)
    hi = count if first is None else min(count, first + CHART_AFTER + 1)
    lo = max(0, hi - CHART_STEPS)
    shown = hi - lo
    step_w = max(9.0, min(60.0, 640.0 / shown))
    gap = max(1.5, step_w * 0.22)
    bar_w = (step_w - gap - 1) / 2
    left, right, top, bottom, plot_h = 46.0, 14.0, 30.0, 38.0, 150.0
    caption = f"first difference: step {data['first_step'] + first + 1}" if first is not None else ""
    width = max(left + shown * step_w + right, left + len(caption) * 6.4 + right, 220.0)
    height = top + plot_h + bottom
    totals = [sum(a for _, a in step) for step in (*expected[lo:hi], *got[lo:hi])]
    ymax = _nice_ceiling(max([*totals, 1]))
    base = top + plot_h

    def y(value: float) -> float:
        return base - plot_h * value / ymax

    def column(i: int) -> float:  # the left edge of step i's column
        return left + (i - lo) * step_w

    ticks = [{"y": round(y(ymax * k / 4), 1), "label": _tick_label(ymax * k / 4)} for k in range(5)]
    unit = f" {data['unit']}" if data["unit"] else ""
    bars, misses = [], []
    for i in range(lo, hi):
        x0 = column(i) + gap / 2
        step_no = data["first_step"] + i + 1
        for side, steps, x, who in ((0, expected, x0, data["expected_label"]),
                                    (1, got, x0 + bar_w + 1, data["got_label"])):
            if i >= len(steps):
                misses.append({"x": round(x + bar_w / 2, 1), "y": round(base - 4, 1), "side": side,
                               "title": f"step {step_no}, {who}: no step"})
                continue
            level = 0.0
            for label, amount in steps[i]:
                if amount <= 0:
                    continue
                h = plot_h * amount / ymax
                bars.append({"x": round(x, 2), "y": round(y(level) - h, 2), "w": round(bar_w, 2),
                             "h": round(h, 2), "colour": data["colours"][label], "side": side,
                             "title": f"step {step_no}, {who}: {label} {amount}{unit}"})
                level += amount
    label_every = next(k for k in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000, 10**9) if k * step_w >= 26)
    labels = []
    first_x = None if first is None else column(first) + step_w / 2
    for i in range(lo, hi):
        step_no = data["first_step"] + i + 1
        x = column(i) + step_w / 2
        regular = step_no % label_every == 0 or i == lo
        if i == first or (regular and (first_x is None or abs(x - first_x) >= 24)):
            labels.append({"x": round(x, 1), "label": str(step_no), "first": i == first})
    marker = None
    if first is not None:
        band_x = column(first)
        anchor, text_x = "middle", band_x + step_w / 2
        if text_x - len(caption) * 3.2 < left + 2:
            anchor, text_x = "start", max(left + 2, band_x)
        elif text_x + len(caption) * 3.2 > width - 4:
            anchor, text_x = "end", min(width - 4, band_x + step_w)
        marker = {"x": round(band_x, 2), "w": round(step_w, 2), "y": top - 6, "h": plot_h + 6,
                  "cx": round(band_x + step_w / 2, 2), "text_x": round(text_x, 2), "anchor": anchor,
                  "caption": caption}
    colours = {label: colour for label, colour in data["colours"].items()
               if any(label == seg[0] for step in (*expected[lo:hi], *got[lo:hi]) for seg in step)}
    legend = [{"label": label, "colour": colour} for label, colour in list(colours.items())[:LEGEND_LIMIT]]
    first_no, last_no = data["first_step"] + lo + 1, data["first_step"] + hi
    return {
        "width": round(width), "height": round(height), "left": left, "plot_width": round(width - left),
        "top": top, "base": base,
        "plot_right": round(column(hi), 2), "ticks": ticks, "bars": bars, "misses": misses,
        "labels": labels, "marker": marker, "legend": legend,
        "legend_more": max(0, len(colours) - LEGEND_LIMIT), "steps": shown,
        "first_no": first_no, "last_no": last_no,
        "partial": lo > 0 or hi < count or data["first_step"] > 0,
        "expected_label": data["expected_label"], "got_label": data["got_label"], "unit": data["unit"],
        "summary": (f"{data['unit'] or 'amounts'} per step, steps {first_no} to {last_no}; "
                    f"{data['expected_label']} on the left of each pair, "
                    f"{data['got_label']} on the right" + (f"; {caption}" if caption else "; the two agree")),
    }


def _tick_label(value: float) -> str:
    return f"{value:g}" if value < 10_000 else f"{value / 1000:g}k"


# -- view data --------------------------------------------------------------------------------------

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
        width = max([len(columns), *(len(r) for r in rows)] or [0])
        columns += [""] * (width - len(columns))
        rows = [r + [""] * (width - len(r)) for r in rows]
        mark = artifact.get("mark_row")
        return {"kind": "table", "title": title, "columns": columns, "rows": rows,
                "mark_row": mark if isinstance(mark, int) and 0 <= mark < len(rows) else None,
                "truncated_rows": int(artifact.get("truncated_rows") or 0)}
    if kind == "trace":
        rows = trace_rows(artifact, before=12, after=3)
        full = trace_rows(artifact) if rows["hidden_before"] or rows["hidden_after"] else None
        return {"kind": "trace", "title": rows["title"], "table": rows, "full": full, "chart": timeline(artifact)}
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
        "help": STATUS_HELP.get(status),
        "artifacts": [artifact_view(a) for a in test.artifacts if not _repeats(a, test.message)],
    }


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


def report_view(card: Scorecard) -> dict[str, Any]:
    """Everything both reports show, computed once from the scorecard."""
    tests = [result_view(t) for t in card.tests]
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
    if not graded:
        tone = "muted"
    elif pct == 100:
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
                 "dash": round(circumference * (pct / 100 if graded else 0), 3)},
        "reason": reason,
        "reason_cut": reason_cut,
        "run_help": RUN_HELP.get(card.status),
        "suites": suites,
        "tests": tests,
        "failing": [t for t in tests if not t["passed"]],
        "counts": counts,
        "passed": counts["passed"],
        "total": len(tests),
        "locked": [{"name": one_line(t.name, 200), "suite": t.suite, "max_score": t.max_score} for t in card.locked],
        "locked_points": sum(t.max_score for t in card.locked),
        "locked_suites": locked_suites(card),
        "backend": one_line(card.backend, 40),
        "graded_at": when(card.graded_at),
        "duration": short_duration(card.duration_s) if card.duration_s else "",
        "sha": one_line(card.submission_sha256, 64),
        "grader_version": one_line(card.grader_version or grader.__version__, 40),
        "schema_version": card.schema_version,
        "limits": {"message": MESSAGE_LIMIT, "output": OUTPUT_LIMIT},
    }


# -- plain text (the exports: Gradescope, PrairieLearn, JUnit) -----------------------------------------

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


def locked_suites(card: Scorecard) -> list[dict[str, Any]]:
    """The suites this tier did not run, each with its label, points and test names, in card order."""
    groups: dict[str, dict[str, Any]] = {}
    for test in card.locked:
        group = groups.setdefault(test.suite, {"name": test.suite, "label": one_line(card.suite_label(test.suite), 80),
                                               "anchor": "locked-" + slug(test.suite), "points": 0, "tests": []})
        group["points"] += test.max_score
        group["tests"].append(one_line(test.name, 200))
    return list(groups.values())


def run_text(card: Scorecard) -> str:
    """The whole run in a few plain lines: score, suites, why a run was not graded and what to do,
    the tests of the suites this tier did not run."""
    view = report_view(card)
    lines = [f"{view['title']}: {card.score}/{card.max_score} points"
             + (f", {view['passed']} of {view['total']} tests passed" if view["graded"] else f" ({card.status})")]
    for suite in view["suites"]:
        lines.append(f"{suite['label']}: {suite['passed']}/{suite['tests']} passed, "
                     f"{suite['score']}/{suite['max_score']} points")
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


# -- Markdown escaping --------------------------------------------------------------------------------

_MD_PUNCT = re.compile(r"([\\`*_{}\[\]()#!|~$]|(?<=www)\.|:(?=/)|@)", re.IGNORECASE)


def md_text(text: Any) -> Markup:
    """Prose for Markdown, always placed mid-line: on one line; `<`, `>` and `&` as HTML entities (no
    tag or entity can form); the punctuation of emphasis, code, links, images, tables, strikethrough
    and math backslash-escaped, and so are the `:` of `scheme://`, the `.` of `www.` and `@`, so no
    autolink forms either."""
    flat = one_line(text, 10_000)
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return Markup(_MD_PUNCT.sub(r"\\\1", flat))


def md_code(text: Any, table: bool = False) -> Markup:
    """An inline code span (literal text: no HTML, links or emphasis), delimited by a backtick run
    longer than any inside. In a table cell `|` is escaped, which GFM honours inside code spans."""
    flat = one_line(text, 10_000)
    if not flat:
        return Markup("")
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    if flat.startswith("`") or flat.endswith("`") or (flat.startswith(" ") and flat.endswith(" ")):
        flat = f" {flat} "
    if table:
        flat = flat.replace("|", "\\|")
    return Markup(f"{fence}{flat}{fence}")


def md_cell(text: Any) -> Markup:
    return md_code(text, table=True)


def md_fence(text: Any, info: str = "text") -> Markup:
    """A fenced code block: the fence is a backtick run longer than any in the text (and at least
    three), so no line of the text can close it."""
    body = printable(text).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return Markup(f"{fence}{info}\n{body}\n{fence}")


# -- rendering ----------------------------------------------------------------------------------------

def templates_folder() -> Path:
    """The project's `templates/` folder (beside `exercises/`), else the one beside the package."""
    from grader.exercise import ExerciseError, project_root

    try:
        folder = project_root() / "templates"
        if (folder / "report.html.j2").is_file():
            return folder
    except ExerciseError:
        pass
    return Path(grader.__file__).resolve().parent.parent / "templates"


@lru_cache(maxsize=4)
def _environment(folder: str) -> Environment:
    env = Environment(
        loader=FileSystemLoader(folder),
        autoescape=select_autoescape(enabled_extensions=("html", "md", "j2"), default=True,
                                     default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(md_text=md_text, md_code=md_code, md_cell=md_cell, md_fence=md_fence,
                       thousands=lambda n: f"{n:,}")
    return env


def _render(name: str, card: Scorecard) -> str:
    env = _environment(str(templates_folder()))
    return env.get_template(name).render(r=report_view(card))


def render_html(card: Scorecard) -> str:
    """One self-contained HTML page: inline CSS and SVG, no script, nothing fetched."""
    return _render("report.html.j2", card)


def render_markdown(card: Scorecard) -> str:
    """The same content as Markdown, for LMS comments and pull requests."""
    return squeeze_blank_lines(_render("report.md.j2", card))


def squeeze_blank_lines(text: str) -> str:
    """At most one blank line in a row outside fenced blocks (the templates' conditionals leave
    some); the inside of a fence is left exactly as it is."""
    out: list[str] = []
    fence = ""
    for line in text.strip("\n").split("\n"):
        if fence:
            if line.startswith(fence) and not line.strip("`"):
                fence = ""
        elif (opening := re.match(r"`{3,}", line)) is not None:
            fence = opening.group()
        elif not line.strip() and out and not out[-1].strip():
            continue
        out.append(line.rstrip() if not fence else line)
    return "\n".join(out) + "\n"
