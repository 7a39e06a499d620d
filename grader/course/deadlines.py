"""Due dates: when each student's submission to an exercise is late, by how much, what that costs, and
when the exercise closes.

An exercise's due and closing dates (exercise.toml's `[web] due` and `[web] closes`, as the dashboard has
changed them since: grader.course.terms) hold for everyone; a student's extension
(the instructor's dashboard) replaces the due date for that student, and lets them submit after the
exercise closes until it. A submission is late when it came in after the student's due date. Nothing
about lateness is stored with a submission: it follows from the time it came in and the dates as they
are now, so an extension given afterwards makes an earlier late submission on time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from grader.core.exercise import Exercise
from grader.course.store import Store, StoredSubmission
from grader.course.terms import LatePolicy, Terms, terms_of


@dataclass(frozen=True)
class Deadlines:
    due: dict[str, datetime] = field(default_factory=dict)       # exercise: its due date
    closes: dict[str, datetime] = field(default_factory=dict)    # exercise: when it takes no more
    extensions: dict[tuple[str, str], datetime] = field(default_factory=dict)  # (student, exercise)
    terms: dict[str, Terms] = field(default_factory=dict)  # exercise: its terms (late policy, release)

    @classmethod
    def of(cls, exercises: Iterable[Exercise], store: Store | None = None) -> Deadlines:
        changes = store.exercise_terms() if store is not None else {}
        terms = {e.slug: terms_of(e, changes.get(e.slug)) for e in exercises}
        return cls({slug: t.due for slug, t in terms.items() if t.due is not None},
                   {slug: t.closes for slug, t in terms.items() if t.closes is not None},
                   store.extensions() if store is not None else {}, terms)

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
        return self.late_by(sub) > 0

    def late_by(self, sub: StoredSubmission) -> float:
        """Seconds the submission came after its student's due date (0 when on time)."""
        due = self.due_for(sub.student, sub.exercise)
        return 0.0 if due is None else max(0.0, (datetime.fromisoformat(sub.submitted_at) - due).total_seconds())

    def late_policy(self, exercise: str) -> LatePolicy:
        found = self.terms.get(exercise)
        return found.late if found is not None else LatePolicy()

    def deduction(self, sub: StoredSubmission) -> float:
        """The points the submission's lateness costs under its exercise's late policy (0 on time, for a
        result with no score, or with no policy)."""
        if sub.card is None or sub.card.status != "graded":
            return 0.0
        return self.late_policy(sub.exercise).deduction(sub.card.score, sub.card.exercise_max_score, self.late_by(sub))


def of_project(store: Store, slugs: Iterable[str]) -> Deadlines:
    """The deadlines of the project's exercises of these names (an exercise the project no longer has
    has none), with the store's extensions."""
    from grader.core.exercise import ExerciseError, load_exercise

    exercises = []
    for slug in sorted(set(slugs)):
        try:
            exercises.append(load_exercise(slug))
        except ExerciseError:
            continue
    return Deadlines.of(exercises, store)
