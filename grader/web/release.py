"""When students see their results: what a student is shown of a scorecard before its exercise's results
are released (exercise.toml's `[web] release`, as the dashboard has changed it: grader.course.terms), and the
dashboard's line of each exercise's release.

Before release a student sees the results of the open suites (the free tier's, which every student may
see) as always, and of the other suites only that they ran and are withheld: how many tests and their
points, never a name, a status, a message, a suite's score, the total score or the diagnosis (a hint
drawn from every failure, the hidden ones too). Every student page and the report take the student's
view from `student_card`, so no page decides this on its own. Instructors always see everything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from grader.core.exercise import Exercise
from grader.core.scorecard import Scorecard
from grader.course.store import Store, StoredSubmission
from grader.course.terms import Terms
from grader.web.exercise_page import moment_text


@dataclass(frozen=True)
class Held:
    """What a student is told of the results withheld: how many tests ran, their points, when they come."""
    tests: int
    points: int
    until: str  # "after the due date, <date>" or "when your instructor releases them"

    @property
    def sentence(self) -> str:
        return (f"{self.tests} more test{'s' if self.tests != 1 else ''}, worth {self.points} "
                f"point{'s' if self.points != 1 else ''}, ran too: their results and your score come {self.until}.")

    def view(self) -> dict[str, Any]:
        """As the report's view data (plain values)."""
        return {"tests": self.tests, "points": self.points, "until": self.until, "sentence": self.sentence}


@dataclass(frozen=True)
class StudentCard:
    """A scorecard as its reader may see it now: `card` is what may be shown; `held`, what is withheld."""
    card: Scorecard
    held: Held | None = None

    @property
    def full_marks(self) -> bool:
        """Full marks as far as the reader knows: never while results are withheld."""
        return self.held is None and self.card.status == "graded" and bool(self.card.max_score) \
            and self.card.score == self.card.max_score


def withheld(card: Scorecard, open_suites: Iterable[str]) -> Scorecard:
    """The card with only the open suites' results: their tests, their score, and no diagnosis (its hint
    is drawn from every failure, so it would tell of the hidden ones). No time either: the run's duration
    and the moment it ended count the hidden tests' time (one that loops to its limit shows as a minute
    against seconds), and an open test's own time and CPU wait grow with the hidden tests running beside it;
    nor the order the results came in."""
    opened = set(open_suites)
    # In the order of their names: the order results came in may follow the hidden tests' pace.
    shown = sorted((dataclasses.replace(test, duration_s=0.0, cpu_wait_s=0.0) for test in card.tests
                    if test.suite in opened), key=lambda test: (test.suite, test.id))
    return dataclasses.replace(card, tests=shown, score=sum(t.score for t in shown),
                               max_score=sum(t.max_score for t in shown), diagnosis=[], duration_s=0.0,
                               graded_at="")


def runs_hidden_suites(card: Scorecard, opened: set[str]) -> bool:
    """Whether the card's tier runs a suite beyond the open ones (its locked suites it does not run)."""
    locked = {test.suite for test in card.locked}
    return any(test.suite not in opened for test in card.tests) or \
        any(suite not in opened and suite not in locked for suite in card.suite_labels)


def until_text(terms: Terms) -> str:
    if terms.release == "after_due" and terms.due is not None:
        return f"after the due date, {moment_text(terms.due)}"
    return "when your instructor releases them"


def student_card(card: Scorecard, terms: Terms | None, now: datetime,
                 open_suites: Iterable[str] = ()) -> StudentCard:
    """What a student sees of `card` now under its exercise's `terms` (None: everything, as an
    instructor). `open_suites`: the exercise's, for a card that does not name its own. A rejected card
    ran nothing, and is shown whole; an error card of a tier with hidden suites keeps back why it failed."""
    if terms is None or terms.released(now) or card.status == "rejected":
        return StudentCard(card)
    opened = set(card.open_suites or open_suites)
    if card.status == "error":
        if not runs_hidden_suites(card, opened):
            return StudentCard(card)
        # Why a run failed may name a hidden test or tell how one went (one that stopped the harness): the
        # student learns that it failed, and why once the results are released; the instructor at once.
        return StudentCard(dataclasses.replace(withheld(card, opened), reason=(
            f"The grading failed. It ran tests whose results come {until_text(terms)}, and why it failed is "
            "told with them; your instructor sees it now. Submitting again grades it again.")))
    if card.status != "graded":
        return StudentCard(card)
    hidden = [test for test in card.tests if test.suite not in opened]
    if not hidden:
        return StudentCard(card)
    return StudentCard(withheld(card, opened), Held(len(hidden), sum(t.max_score for t in hidden), until_text(terms)))


def shown(subs: Iterable[StoredSubmission], terms: Mapping[str, Terms] | None, now: datetime,
          exercises: Mapping[str, Exercise],
          due_for: Callable[[str, str], datetime | None] | None = None) -> dict[int, StudentCard]:
    """Each graded submission's card as its reader sees it, by submission id; `terms` None for an
    instructor (everything shown). `due_for(student, exercise)`: each student's own due date (an
    extension moves it), after which `after_due` releases their results: a student still allowed to
    hand in never sees the hidden suites' results before then."""
    views = {}
    for sub in subs:
        if sub.card is None:
            continue
        exercise = exercises.get(sub.exercise)
        own = None if terms is None else terms.get(sub.exercise)
        if own is not None and own.release == "after_due" and due_for is not None:
            own = dataclasses.replace(own, due=due_for(sub.student, sub.exercise))
        views[sub.id] = student_card(sub.card, own, now, exercise.open_suites if exercise is not None else ())
    return views


def seen_whole(subs: Iterable[StoredSubmission], terms: Mapping[str, Terms], now: datetime,
               exercises: Mapping[str, Exercise],
               due_for: Callable[[str, str], datetime | None] | None = None) -> set[int]:
    """The ids of the graded submissions whose students see every result now: what may leave the service
    (the class site's zip) before release without telling of the hidden tests."""
    return {sid for sid, view in shown(subs, terms, now, exercises, due_for).items() if view.held is None}


# -- the dashboard --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReleaseRow:
    """An exercise's release as the dashboard says it, and which button it offers ("release",
    "withhold" or none)."""
    text: str
    released: bool
    button: str = ""


def release_row(terms: Terms, now: datetime) -> ReleaseRow:
    released = terms.released(now)
    if terms.release == "at_once":
        return ReleaseRow("shown at once", True)
    if terms.release == "after_due":
        if terms.due is None:
            return ReleaseRow("released (after the due date, and there is none)", True)
        if released:
            return ReleaseRow(f"released (the due date, {moment_text(terms.due)}, has passed)", True)
        return ReleaseRow(f"released after the due date, {moment_text(terms.due)}", False)
    if not released:
        return ReleaseRow("withheld until you release them: students see the open tests' results only", False,
                          "release")
    change = terms.changed.get("released_at")
    assert terms.released_at is not None
    by = f" by {change.by}" if change is not None and change.by else ""
    return ReleaseRow(f"released {moment_text(terms.released_at)}{by}", True, "withhold")


def release_rows(terms: Mapping[str, Terms], now: datetime) -> dict[str, ReleaseRow]:
    return {slug: release_row(found, now) for slug, found in terms.items()}


class NothingToRelease(ValueError):
    """An exercise whose results are not released by hand (its sentence says when they are)."""


def set_released(store: Store, exercise: Exercise, terms: Terms, released: bool, now: datetime, by: str) -> None:
    """Release the exercise's hidden results now, or withhold them again ("" keeps no moment), recorded
    with who did it. Only an exercise released by hand (`on_release`) is."""
    if terms.release != "on_release":
        when = "at once" if terms.release == "at_once" else "after the due date"
        raise NothingToRelease(f"The results of {exercise.title} are shown {when}: there is nothing to release "
                               "or withhold by hand.")
    store.set_exercise_terms(exercise.slug, {"released_at": now.isoformat(timespec="seconds") if released else ""},
                             by)
