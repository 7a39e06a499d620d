"""Due dates: when each student's submission to an exercise is late, and when the exercise closes.

An exercise's `[web] due` and `[web] closes` (exercise.toml) hold for everyone; a student's extension
(the instructor's dashboard) replaces the due date for that student, and lets them submit after the
exercise closes until it. A submission is late when it came in after the student's due date. Nothing
about lateness is stored with a submission: it follows from the time it came in and the dates as they
are now, so an extension given afterwards makes an earlier late submission on time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from grader.exercise import Exercise
from grader.store import Store, StoredSubmission


@dataclass(frozen=True)
class Deadlines:
    due: dict[str, datetime] = field(default_factory=dict)       # exercise: its due date
    closes: dict[str, datetime] = field(default_factory=dict)    # exercise: when it takes no more
    extensions: dict[tuple[str, str], datetime] = field(default_factory=dict)  # (student, exercise)

    @classmethod
    def of(cls, exercises: Iterable[Exercise], store: Store | None = None) -> Deadlines:
        listed = list(exercises)
        return cls({e.slug: e.web.due for e in listed if e.web.due is not None},
                   {e.slug: e.web.closes for e in listed if e.web.closes is not None},
                   store.extensions() if store is not None else {})

    def due_for(self, student: str, exercise: str) -> datetime | None:
        return self.extensions.get((student, exercise), self.due.get(exercise))

    def closes_for(self, student: str, exercise: str) -> datetime | None:
        """When the exercise stops taking this student's submissions (None: never)."""
        closes = self.closes.get(exercise)
        own = self.extensions.get((student, exercise))
        if closes is None or own is None:
            return closes
        return max(closes, own)

    def is_open(self, student: str, exercise: str, moment: datetime | None = None) -> bool:
        closes = self.closes_for(student, exercise)
        return closes is None or (moment or datetime.now(timezone.utc)) <= closes

    def is_late(self, sub: StoredSubmission) -> bool:
        due = self.due_for(sub.student, sub.exercise)
        return due is not None and datetime.fromisoformat(sub.submitted_at) > due


def of_project(store: Store, slugs: Iterable[str]) -> Deadlines:
    """The deadlines of the project's exercises of these names (an exercise the project no longer has
    has none), with the store's extensions."""
    from grader.exercise import ExerciseError, load_exercise

    exercises = []
    for slug in sorted(set(slugs)):
        try:
            exercises.append(load_exercise(slug))
        except ExerciseError:
            continue
    return Deadlines.of(exercises, store)
