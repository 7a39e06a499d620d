"""Gradebooks: one row per student, from the scorecards a policy picks."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable

from grader.scorecard import Scorecard
from grader.store import StoredSubmission

POLICIES = ("latest", "best")


def pick(submissions: Iterable[StoredSubmission], policy: str) -> dict[tuple[str, str], StoredSubmission]:
    """Per (student, exercise), the graded submission that counts: the latest, or the best (ties: latest)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose {' or '.join(POLICIES)}")
    chosen: dict[tuple[str, str], StoredSubmission] = {}
    for sub in submissions:  # in submission order
        if sub.card is None:
            continue
        key = (sub.student, sub.exercise)
        current = chosen.get(key)
        if current is None or policy == "latest" or sub.card.score >= current.card.score:  # type: ignore[union-attr]
            chosen[key] = sub
    return chosen


def test_columns(cards: Iterable[Scorecard]) -> list[str]:
    columns: dict[str, None] = {}
    for card in cards:
        for test in card.tests:
            columns.setdefault(test.name, None)
    return list(columns)


def rows(entries: list[tuple[str, Scorecard]]) -> tuple[list[str], list[dict[str, object]]]:
    """(header, rows): student, score, max_score, then each test's points ('' when it did not run)."""
    tests = test_columns(card for _, card in entries)
    header = ["student", "score", "max_score", *tests]
    table = []
    for student, card in sorted(entries, key=lambda e: e[0]):
        row: dict[str, object] = {"student": student, "score": card.score, "max_score": card.max_score}
        earned = {t.name: t.score for t in card.tests}
        row.update({name: earned.get(name, "") for name in tests})
        table.append(row)
    return header, table


def to_csv(entries: list[tuple[str, Scorecard]]) -> str:
    header, table = rows(entries)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for row in table:
        # A leading =, +, - or @ would be a formula to a spreadsheet; student ids are validated, but be sure.
        writer.writerow({k: (f"'{v}" if isinstance(v, str) and v and v[0] in "=+-@" else v) for k, v in row.items()})
    return buffer.getvalue()


def to_json(entries: list[tuple[str, Scorecard]]) -> str:
    header, table = rows(entries)
    return json.dumps({"columns": header, "rows": table}, indent=2)
