"""What a regrade of an exercise changed: for each submission, its newest grading beside the one before.

The store keeps every grading of a submission (a regrade adds one), so the summary needs no record of
the regrade itself: a submission graded twice or more compares its last two scorecards, one still in
the queue is waiting, one graded once has nothing to compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select

from grader.course.store import Store
from grader.db import schema

WAITING = ("queued", "grading")


@dataclass(frozen=True)
class Grading:
    status: str
    score: int
    max_score: int
    graded_at: str

    def text(self) -> str:
        return f"{self.score}/{self.max_score}" if self.status != "error" else "error"

    def same_result(self, other: Grading) -> bool:
        # 0/10 and 0/15 are not the same result: the suites' points changed, and so does the student's share.
        return (self.status, self.score, self.max_score) == (other.status, other.score, other.max_score)

    def share(self) -> float:
        return self.score / self.max_score if self.max_score and self.status != "error" else 0.0


@dataclass(frozen=True)
class Change:
    submission_id: int
    student: str
    tier: str
    before: Grading
    after: Grading


@dataclass
class RegradeSummary:
    exercise: str
    submissions: int = 0
    students: int = 0
    waiting: int = 0           # still queued or being graded
    graded_once: int = 0       # nothing to compare yet
    unchanged: int = 0
    changed: list[Change] = field(default_factory=list)


def regrade_summary(store: Store, exercise: str) -> RegradeSummary:
    s, c = schema.submissions, schema.scorecards
    with store.reading() as db:
        subs = db.execute(select(s.c.id, s.c.student_id, s.c.tier, s.c.state)
                          .where(s.c.exercise == exercise).order_by(s.c.id)).all()
        rows = db.execute(select(c.c.submission_id, c.c.status, c.c.score, c.c.max_score, c.c.graded_at)
                          .join(s, s.c.id == c.c.submission_id).where(s.c.exercise == exercise)
                          .order_by(c.c.id)).all()
    history: dict[int, list[Grading]] = {}
    for row in rows:
        history.setdefault(row.submission_id, []).append(Grading(row.status, row.score, row.max_score, row.graded_at))
    summary = RegradeSummary(exercise, len(subs), len({sub.student_id for sub in subs}))
    for sub in subs:
        gradings = history.get(sub.id, [])
        if sub.state in WAITING:
            summary.waiting += 1
        elif len(gradings) < 2:
            summary.graded_once += 1
        elif gradings[-1].same_result(gradings[-2]):
            summary.unchanged += 1
        else:
            summary.changed.append(Change(sub.id, sub.student_id, sub.tier, gradings[-2], gradings[-1]))
    return summary
