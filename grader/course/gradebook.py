"""Gradebooks: one row per student, from the scorecards a policy picks."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grader.core.scorecard import Scorecard, stopped_at_time_limit
from grader.course.store import Adjustment, StoredSubmission

if TYPE_CHECKING:
    from grader.course.deadlines import Deadlines

POLICIES = ("latest", "best", "on-time")
Late = Callable[[StoredSubmission], bool]


def pick(submissions: Iterable[StoredSubmission], policy: str, late: Late | None = None,
         worth: Callable[[StoredSubmission], float] | None = None) -> dict[tuple[str, str], StoredSubmission]:
    """Per (student, exercise), the graded submission that counts: the latest, the best (ties: latest), or
    the latest on time (`late` says which came after the student's due date; a student with none on
    time keeps their latest, which the gradebook marks late). The best is the highest share of its
    points (a student graded on two tiers has two maximums), and a result the grader vouches for beats
    an error.

    A rejected file (refused before any test ran: a syntax error, too large, empty) never counts over
    another submission, under every policy: no test judged the student's work, so it says nothing of
    their standing. It stands only for a student who has handed in nothing else."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose {', '.join(POLICIES)}")
    handed_in: dict[tuple[str, str], list[StoredSubmission]] = {}
    for sub in submissions:  # in submission order
        if sub.card is not None:
            handed_in.setdefault((sub.student, sub.exercise), []).append(sub)
    chosen: dict[tuple[str, str], StoredSubmission] = {}
    for key, subs in handed_in.items():
        judged = [sub for sub in subs if sub.card is not None and sub.card.status != "rejected"]
        chosen[key] = _count(judged or subs, policy, late, worth)
    return chosen


def _count(subs: list[StoredSubmission], policy: str, late: Late | None,
           worth: Callable[[StoredSubmission], float] | None) -> StoredSubmission:
    """The one of a student's submissions to an exercise (in submission order, each with a card) that counts."""
    current = subs[0]
    for sub in subs[1:]:
        if policy == "on-time" and late is not None:
            if not late(sub) or late(current):
                current = sub
        elif policy != "best" or _merit(sub, worth) >= _merit(current, worth):
            current = sub
    return current


def _merit(sub: StoredSubmission, worth: Callable[[StoredSubmission], float] | None) -> tuple[bool, float]:
    # A share of the whole exercise: a tier that ran fewer tests does not beat one that ran them all.
    card = sub.card
    assert card is not None
    whole = card.exercise_max_score
    score = worth(sub) if worth is not None else card.score
    return card.status != "error", score / whole if whole else 0.0


Adjustments = dict[tuple[str, str], Adjustment]  # (student, exercise): the adjustment in force


def worth(sub: StoredSubmission, deadlines: Deadlines | None, adjustments: Adjustments) -> float:
    """A graded submission's grade as `best` compares them: its score less its late deduction, plus an
    instructor's adjustment."""
    assert sub.card is not None
    adjustment = adjustments.get((sub.student, sub.exercise))
    return (sub.card.score - (deadlines.deduction(sub) if deadlines else 0.0)
            + (adjustment.points if adjustment else 0.0))


def test_columns(cards: Iterable[Scorecard]) -> list[str]:
    columns: dict[str, None] = {}
    for card in cards:
        for test in card.tests:
            columns.setdefault(test.name, None)
    return list(columns)


@dataclass(frozen=True)
class Entry:
    """One row of a gradebook: a student's counted scorecard and when that submission came in."""
    student: str
    card: Scorecard
    submitted_at: str = ""
    name: str = ""  # the roster's name; left empty where students are shown under pseudonyms
    late: bool = False  # handed in after the student's due date
    deduction: float = 0.0  # the points the exercise's late policy takes off
    adjustment: float = 0.0  # the points an instructor added (negative: took off) by hand
    adjustment_comment: str = ""  # why
    prediction: str = ""  # the answer to the question before the editor: right, wrong, or "" (none asked or given)


def entry_of(shown: str, sub: StoredSubmission, name: str = "", deadlines: Deadlines | None = None,
             adjustments: Adjustments | None = None,
             predictions: dict[tuple[str, str], bool] | None = None) -> Entry:
    """The gradebook's row of a counted submission (with a scorecard), shown under `shown` (the student's
    id, or a pseudonym): its lateness and what the late policy takes off as the dates are now, the
    instructor's adjustment, and the answer to the exercise's question."""
    assert sub.card is not None
    adjustment = (adjustments or {}).get((sub.student, sub.exercise))
    answer = (predictions or {}).get((sub.student, sub.exercise))
    return Entry(shown, sub.card, sub.submitted_at, name, deadlines.is_late(sub) if deadlines else False,
                 deadlines.deduction(sub) if deadlines else 0.0, adjustment.points if adjustment else 0.0,
                 adjustment.comment if adjustment else "", "" if answer is None else "right" if answer else "wrong")


Entries = Iterable[Entry | tuple[str, Scorecard] | tuple[str, Scorecard, str]]
# The columns before the tests'. tier: the tier the counted submission was graded on; score: empty (null
# in JSON) for an error; max_score: the whole exercise's points, whatever the tier ran, so that score /
# max_score is a share of the exercise and a free tier's full score is never read as full marks;
# status: graded, rejected or error; reason: why, when not graded; tier_max_score: the points of the
# tests the tier ran (a free tier's full score equals it); tests_failed: the tests that ran and gave a
# wrong answer or failed otherwise (crashed, an error); tests_timed_out: those stopped at their time
# limit; timed_out: the whole run was stopped at the exercise's time limit (status error). A test's
# column holds 0 for both a wrong answer and a timeout: these counts tell them apart. The columns after
# graded_at come last so that the columns a spreadsheet already reads keep their places. score is the
# grade: raw_score (what the tests gave) less late_deduction (the exercise's late policy), plus adjustment
# (an instructor's, by hand, with adjustment_comment), never below 0; prediction: whether the answer to the
# question before the editor was right.
FIXED_COLUMNS = ["student", "name", "tier", "score", "max_score", "status", "reason", "submitted_at", "late",
                 "graded_at", "tier_max_score", "tests_failed", "tests_timed_out", "timed_out", "raw_score",
                 "late_deduction", "adjustment", "adjustment_comment", "prediction"]


def rows(entries: Entries) -> tuple[list[str], list[dict[str, object]]]:
    """(header, rows): the fixed columns, then each test's points ('' when it did not run)."""
    found = [e if isinstance(e, Entry) else Entry(*e) for e in entries]
    tests = test_columns(e.card for e in found)
    header = [*FIXED_COLUMNS, *tests]
    table = []
    for entry in sorted(found, key=lambda e: e.student):
        card = entry.card
        # No score where the grader cannot vouch for one (an error, a run stopped at the time limit): a 0
        # there would read as a judgement. The status and reason say what happened.
        raw = None if card.status == "error" else card.score
        row: dict[str, object] = {"student": entry.student, "name": entry.name, "tier": card.tier,
                                  "score": final_score(card, entry.deduction, entry.adjustment),
                                  "max_score": card.exercise_max_score,
                                  "status": card.status, "reason": " ".join(card.reason.split()),
                                  "submitted_at": entry.submitted_at, "late": entry.late, "graded_at": card.graded_at,
                                  "tier_max_score": card.max_score, "tests_failed": failed_tests(card),
                                  "tests_timed_out": timed_out_tests(card), "timed_out": stopped_at_time_limit(card),
                                  "raw_score": raw, "late_deduction": points(entry.deduction),
                                  "adjustment": points(entry.adjustment),
                                  "adjustment_comment": " ".join(entry.adjustment_comment.split()),
                                  "prediction": entry.prediction}
        earned = {t.name: t.score for t in card.tests}
        row.update({name: earned.get(name, "") for name in tests})
        table.append(row)
    return header, table


def final_score(card: Scorecard, deduction: float = 0.0, adjustment: float = 0.0) -> float | int | None:
    """The grade: the tests' score less the late policy's deduction plus an instructor's adjustment, never
    below 0; None where the grader could not vouch for a score (an error)."""
    if card.status == "error":
        return None
    return points(max(0.0, card.score - deduction + adjustment))


def points(value: float) -> float | int:
    """Points as a spreadsheet reads them: a whole number without ".0", else to hundredths."""
    rounded = round(value, 2)
    return int(rounded) if rounded == int(rounded) else rounded


def timed_out_tests(card: Scorecard) -> int:
    return sum(1 for test in card.tests if test.status == "timeout")


def failed_tests(card: Scorecard) -> int:
    """Tests that ran and did not pass, other than by running out of time."""
    return sum(1 for test in card.tests if test.status not in ("passed", "timeout"))


def to_csv(entries: Entries) -> str:
    header, table = rows(entries)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for row in table:
        writer.writerow({k: cell(v) for k, v in row.items()})
    return buffer.getvalue()


def cell(value: object) -> object:
    """A CSV cell a spreadsheet reads as text: a leading =, +, - or @ would be a formula (student ids are
    validated, but names, emails and comments come from people)."""
    return f"'{value}" if isinstance(value, str) and value and value[0] in "=+-@" else value


def to_json(entries: Entries) -> str:
    header, table = rows(entries)
    return json.dumps({"columns": header, "rows": table}, indent=2)
