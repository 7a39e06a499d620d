"""Structured feedback a test attaches to its result: data only, rendered later by the reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Cell = str | int | float | bool | None
Segment = tuple[str, int]  # (label, amount): how much of something one label had in one step

MAX_ROWS = 200
MAX_STEPS = 200
MAX_SEGMENTS = 200  # per step: a plan of 20,000 entries must not make every test's record megabytes
MAX_TEXT = 20_000  # characters of a text artifact's body


def _cell(value: Any) -> Cell:
    if value is None or type(value) in (str, int, float, bool):
        cell: Cell = value
        return cell
    return str(value)


def first_difference(expected: list[list[Segment]], got: list[list[Segment]]) -> int | None:
    """The index of the first step where the two traces differ, or None when they agree. Segments are
    compared as (text, int), one step at a time, however long the steps."""
    def plain(step: list[Segment] | None) -> list[tuple[str, int]] | None:
        return None if step is None else [(str(lbl), int(n)) for lbl, n in step]

    for i in range(max(len(expected), len(got))):
        if plain(expected[i] if i < len(expected) else None) != plain(got[i] if i < len(got) else None):
            return i
    return None


@dataclass
class Feedback:
    """The `feedback` fixture: tests call its methods; the harness stores `artifacts` in the scorecard."""

    artifacts: list[dict[str, Any]] = field(default_factory=list)

    def text(self, title: str, body: str) -> None:
        body = str(body)
        if len(body) > MAX_TEXT:
            body = f"{body[:MAX_TEXT]}… [{len(body) - MAX_TEXT:,} more characters cut]"
        self.artifacts.append({"kind": "text", "title": str(title)[:500], "body": body})

    def table(self, title: str, columns: list[str], rows: list[list[Any]], mark_row: int | None = None) -> None:
        """A table; `mark_row` (an index into rows) is highlighted, e.g. the first wrong row."""
        self.artifacts.append({
            "kind": "table",
            "title": str(title),
            "columns": [str(c) for c in columns],
            "rows": [[_cell(c) for c in row] for row in rows[:MAX_ROWS]],
            "truncated_rows": max(0, len(rows) - MAX_ROWS),
            "mark_row": mark_row if mark_row is None or mark_row < MAX_ROWS else None,
        })

    def trace(self, title: str, expected: list[list[Segment]], got: list[list[Segment]],
              expected_label: str = "reference", got_label: str = "your code", unit: str = "") -> None:
        """Step-by-step trace, expected beside got: each step is a list of (label, amount) segments.

        What a step and a segment mean is the exercise's: a step of a simulation and the amount each
        of its actors got, say. `unit` names the amounts ("tokens", "blocks") where reports show
        them. The first step where the two differ is computed here, so every report marks the same one.
        """
        if not expected and not got:
            return  # no step to show (the test failed before the first): no empty table in the report
        # On the whole steps: a difference past the segments kept is still the step's difference.
        diverge = first_difference(expected, got)
        cut = sum(max(0, len(step) - MAX_SEGMENTS) for side in (expected, got) for step in side)
        exp = [[(str(lbl), int(n)) for lbl, n in step[:MAX_SEGMENTS]] for step in expected]
        have = [[(str(lbl), int(n)) for lbl, n in step[:MAX_SEGMENTS]] for step in got]
        # Keep a window around the first difference: the start, and the steps just before it. Without
        # one the test failed on something else at the trace's end (it runs up to the failing step).
        if diverge is None:
            start = max(0, max(len(exp), len(have)) - MAX_STEPS)
        else:
            start = 0 if diverge < MAX_STEPS else diverge - MAX_STEPS // 2
        self.artifacts.append({
            "kind": "trace",
            "title": str(title),
            "expected_label": str(expected_label),
            "got_label": str(got_label),
            "unit": str(unit),
            "first_step": start,
            "expected": [[list(s) for s in step] for step in exp[start:start + MAX_STEPS]],
            "got": [[list(s) for s in step] for step in have[start:start + MAX_STEPS]],
            "first_difference": diverge,
            "truncated_segments": cut,
        })
