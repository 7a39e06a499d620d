"""What the pages of both roles look up for a request: the exercise or the submission it names (a 404
page when there is none for this person), the deadlines in force, the results the person signed in may
see now, and the tier a student's plan grades on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from grader.core.exercise import Exercise
from grader.course.deadlines import Deadlines
from grader.course.store import StoredSubmission
from grader.service import accounts
from grader.web import exercise_page, release, terms_page
from grader.web.base import Page, Service, whole_number


def exercise_of(service: Service, slug: str) -> Exercise:
    exercise = service.exercises.get(slug)
    if exercise is None:
        raise Page(404, "No such exercise", "There is no exercise with that name.")
    return exercise


def not_open_yet(deadlines: Deadlines, instructor: bool, exercise: Exercise, now: datetime) -> str:
    """Why a student may not see the exercise now ("": they may): its "visible from" date has not come.
    Instructors see every exercise."""
    terms = deadlines.terms.get(exercise.slug)
    if instructor or terms is None or terms.is_visible(now) or terms.opens is None:
        return ""
    return f"{exercise.title} opens {exercise_page.moment_text(terms.opens)}: it is not open to students before then."


def open_exercise(service: Service, who: accounts.Session | None, slug: str) -> Exercise:
    """The exercise of that name as the signed-in person may see it now: a 404 page for a student before it
    opens (the page says when it does), as for an exercise there is not."""
    exercise = exercise_of(service, slug)
    why = not_open_yet(deadlines_of(service), who is not None and who.is_instructor, exercise, service.clock())
    if why:
        raise Page(404, "Not open yet", why)
    return exercise


def submission_for(service: Service, who: accounts.Session, raw_id: str) -> StoredSubmission:
    """A submission the signed-in person may see: their own, or any for an instructor or a TA."""
    number = whole_number(raw_id, 11)
    sub = service.store.submission(number) if number is not None else None
    if sub is None or (not who.is_staff and sub.student != who.student):
        raise Page(404, "No such submission", "There is no submission of yours with that number.")
    return sub


def deadlines_of(service: Service) -> Deadlines:
    deadlines = Deadlines.of(service.exercises.values(), service.store)
    service.known_deadlines = deadlines  # what says "closed" to a submission while the store is away
    return deadlines


def late_ids(deadlines: Deadlines, subs: list[StoredSubmission]) -> set[int]:
    """The ids of the submissions that came in after their student's due date."""
    return {sub.id for sub in subs if deadlines.is_late(sub)}


def shown_to(service: Service, who: accounts.Session | None, subs: list[StoredSubmission],
             deadlines: Deadlines | None = None) -> dict[int, release.StudentCard]:
    """Each graded submission's result as the signed-in person may see it now (grader.web.release):
    a student, before their exercise's results are released, without the hidden suites'; an instructor or a
    TA, all."""
    if who is None or who.is_staff:
        return release.shown(subs, None, service.clock(), service.exercises)
    deadlines = deadlines or deadlines_of(service)
    return release.shown(subs, deadlines.terms, service.clock(), service.exercises, deadlines.due_for)


def extension_row(deadlines: Deadlines, student: str, exercise: Exercise) -> dict[str, Any]:
    """An exercise with dates, as the instructor's page of a student shows it: the student's due date,
    whether it is their own, and the value the form's date field starts from, in the zone the course shows
    the exercise's dates in (the one the form's date is read in)."""
    due = deadlines.due_for(student, exercise.slug)
    zone = terms_page.course_zone(deadlines.terms, exercise.slug)
    return {"exercise": exercise, "due": exercise_page.moment_text(due) if due else "",
            "own": (student, exercise.slug) in deadlines.extensions,
            "value": due.astimezone(zone).strftime("%Y-%m-%dT%H:%M") if due else "",
            "zone": terms_page.zone_text(zone.utcoffset(None))}


def tier_for(exercise: Exercise, plan: str) -> str:
    """The exercise's tier a student's plan grades on: the tier of that name where the exercise has
    one; else, for premium, the tier that runs the most suites, and for free the first declared."""
    if plan in exercise.tiers:
        return plan
    return exercise.top_tier if plan == "premium" else next(iter(exercise.tiers))
