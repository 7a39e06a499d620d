"""The pages a student works in: the home page, an exercise (its statement, its question, the editor,
the submissions so far), submitting, a submission and its report, the reference solution, the history.
A submission's page and report serve an instructor too, with every result shown.
"""

from __future__ import annotations

import functools
import math
from datetime import datetime
from typing import Any

from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from grader.core.exercise import Exercise
from grader.core.validate import Rejected, validate
from grader.course.deadlines import Deadlines
from grader.course.gradebook import final_score, points
from grader.course.store import StoredSubmission, TooSoon
from grader.diagnosis.words import card_diagnosis
from grader.service import accounts, jobs
from grader.web import exercise_page
from grader.web.base import Page, Service, enqueue, render, whole_number
from grader.web.lookup import (
    deadlines_of,
    exercise_of,
    late_ids,
    not_open_yet,
    open_exercise,
    shown_to,
    submission_for,
    tier_for,
)
from grader.web.outage import spooled_submission
from grader.web.staff import may_adjust


def home(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    if who is None:
        return render("signed_out.html.j2", status=401, who=None)
    if who.is_staff:
        return RedirectResponse("/instructor" if who.is_instructor else "/staff", status_code=303)
    history = service.store.submissions(student=who.student)
    deadlines = deadlines_of(service)
    dates = {slug: deadline_of(service, deadlines, who.student or "", slug) for slug in service.exercises}
    now = service.clock()
    listed = [e for e in service.exercises.values() if not not_open_yet(deadlines, False, e, now)]
    return render("home.html.j2", who=who, exercises=listed, dates=dates,
                  history=list(reversed(history)), late=late_ids(deadlines, history),
                  shown=shown_to(service, who, history, deadlines))


def deadline_of(service: Service, deadlines: Deadlines, student: str, slug: str) -> dict[str, Any] | None:
    """What a page says of an exercise's dates to one student now (None: the exercise has none)."""
    policy = deadlines.late_policy(slug)
    return exercise_page.deadline_view(deadlines.due_for(student, slug), deadlines.closes_for(student, slug),
                                       (student, slug) in deadlines.extensions, service.clock(),
                                       policy.describe() if policy.any else "")


def exercise_view(service: Service, request: Request, who: accounts.Session | None, form: FormData | None,
                  problem: str = "", status: int = 200, code: str | None = None) -> Response:
    """The exercise's page; after a refused submission, with its `problem` and the student's `code` kept
    in the editor."""
    assert who is not None
    exercise = open_exercise(service, who, request.path_params["slug"])
    question = exercise.prediction
    answered = accounts.prediction(service.store, who.student, exercise.slug) if who.student else None
    mine = service.store.submissions(exercise.slug, who.student) if who.student else []
    web = exercise.web
    refused_code = code  # a refused submission's code, kept on the page whether or not the editor is open
    if code is None:
        # The editor holds what the student handed in last, to go on from; the stub only before that.
        latest = service.store.content(mine[-1].id) if mine else None
        code = exercise.stub.read_text(encoding="utf-8") if latest is None else latest.decode("utf-8", "replace")
    deadlines = deadlines_of(service)
    deadline = deadline_of(service, deadlines, who.student or "", exercise.slug)
    deadline_open = deadline is None or deadline["open"]
    return render("exercise.html.j2", status=status, who=who, exercise=exercise, question=question,
                  deadline=deadline, late=late_ids(deadlines, mine), refused_code=refused_code,
                  shown=shown_to(service, who, mine, deadlines),
                  answered=answered, statement=exercise_page.statement_html(exercise),
                  visible=exercise_page.visible_tests(exercise),
                  stub=code,
                  history=list(reversed(mine)), problem=problem,
                  solution_rule=exercise_page.solution_rule_text(web.solution, closed=not deadline_open),
                  solution_open=solution_allowed(service, who, exercise, mine),
                  editor_open=who.student is not None and (question is None or answered is not None)
                  and deadline_open,
                  max_kb=exercise.max_submission_bytes // 1024)


def solution_allowed(service: Service, who: accounts.Session, exercise: Exercise,
                     mine: list[StoredSubmission]) -> bool:
    if who.is_staff:
        return True
    if who.tier != "premium":
        return False
    cards = [s.card for s in mine if s.card is not None and s.card.status == "graded"]
    # Full marks only as the student may know them: results withheld until release are not full marks yet.
    views = shown_to(service, who, mine)
    return exercise_page.solution_open(exercise.web.solution, bool(cards),
                                       any(view.full_marks for view in views.values()))


def predict(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert who is not None and form is not None and who.student
    exercise = open_exercise(service, who, request.path_params["slug"])
    question = exercise.prediction
    if question is None:
        raise Page(404, "No question", "This exercise asks no question before you code.")
    choice = whole_number(str(form.get("choice", "")), 3)
    if choice is None or not choice < len(question.choices):
        raise Page(400, "Pick an answer", "Choose one of the answers before you go on.")
    accounts.record_prediction(service.store, who.student, exercise.slug, question.choices[choice],
                               choice == question.answer)
    return RedirectResponse(f"/exercises/{exercise.slug}#editor", status_code=303)


def submit(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert who is not None and form is not None and who.student
    exercise = exercise_of(service, request.path_params["slug"])
    content = submitted_content(exercise, form)
    try:
        open_exercise(service, who, exercise.slug)  # from the store: while it is away, the last dates known
        return store_submission(service, request, who, exercise, content)
    except (OperationalError, InterfaceError):
        if service.spool is None:
            raise  # the outage page
        return spooled_submission(service, request, who, exercise, content)


def submitted_content(exercise: Exercise, form: FormData) -> bytes:
    upload, typed = form.get("upload"), form.get("code", "")
    if isinstance(upload, UploadFile) and upload.filename:
        return upload.file.read(exercise.max_submission_bytes + 1)
    if isinstance(typed, str):
        # A textarea comes back with CRLF line ends: keep the file as the student sees it.
        return typed.replace("\r\n", "\n").encode("utf-8")
    raise Page(400, "Not a submission", "The code comes as text from the editor, or as a file in the upload field.")


def store_submission(service: Service, request: Request, who: accounts.Session, exercise: Exercise,
                     content: bytes) -> Response:
    assert who.student
    if exercise.prediction and accounts.prediction(service.store, who.student, exercise.slug) is None:
        raise Page(400, "Before you code", "Answer the exercise's question first.")
    if not content.strip():
        return exercise_view(service, request, who, None, "The submission is empty: paste your code or choose a file.", 400)
    deadlines = deadlines_of(service)
    if not deadlines.is_open(who.student, exercise.slug, service.clock()):
        closes = deadlines.closes_for(who.student, exercise.slug)
        assert closes is not None
        return exercise_view(service, request, who, None,
                             f"This exercise closed at {exercise_page.moment_text(closes)}: it takes no more "
                             "submissions. Your instructor can give you an extension.", 403,
                             code=content.decode("utf-8", "replace"))
    try:
        submission_id, new = jobs.submit(service.store, who.student, exercise.slug, tier_for(exercise, who.tier),
                                         exercise.submission_file, content, service.interval(exercise),
                                         service.clock(), refused=functools.partial(will_be_rejected, exercise))
    except TooSoon as soon:
        return exercise_view(service, request, who, None,
                             f"You submitted less than {service.interval(exercise):g} s ago: you can submit again "
                             f"in {wait_seconds(soon.ready, service.clock())} s. Your code is still in the editor.", 429,
                             code=content.decode("utf-8", "replace"))
    if new:
        enqueue(service, submission_id)
    return RedirectResponse(f"/submissions/{submission_id}" + ("" if new else "?same=1"), status_code=303)


def will_be_rejected(exercise: Exercise, content: bytes) -> bool:
    """Whether grading will reject the file before any test runs (the same checks, grader.core.validate): such a
    file does not use up the student's interval between submissions."""
    try:
        validate(content, exercise.submission_file, exercise.max_submission_bytes)
    except Rejected:
        return True
    return False


def wait_seconds(ready: datetime, now: datetime) -> int:
    """Whole seconds until `ready`, at least 1: what a student waits, in the unit they count."""
    return max(1, math.ceil((ready - now).total_seconds()))


def solution(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert who is not None
    exercise = open_exercise(service, who, request.path_params["slug"])
    mine = service.store.submissions(exercise.slug, who.student) if who.student else []
    if not solution_allowed(service, who, exercise, mine):
        closed = who.student is not None and not deadlines_of(service).is_open(who.student, exercise.slug,
                                                                                service.clock())
        rule = exercise_page.solution_rule_text(exercise.web.solution, closed)
        # A premium student is told when the solution opens, not that it is premium (they have premium).
        if who.tier == "premium":
            raise Page(403, "Not open yet", f"The reference solution {rule}.")
        raise Page(403, "Premium", "The reference solution is part of Premium.")
    return render("solution.html.j2", who=who, exercise=exercise,
                  source=exercise.reference.read_text(encoding="utf-8"))


def submission_view(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert who is not None
    sub = submission_for(service, who, request.path_params["id"])
    state = jobs.status(service.store, sub.id)
    content = service.store.content(sub.id)
    code = None if content is None else content.decode("utf-8", "replace")
    exercise = service.exercises.get(sub.exercise)
    # A tier that leaves suites out is never shown as the exercise's full marks, however it scored.
    top = exercise.top_tier if exercise is not None else sub.tier
    deadlines = deadlines_of(service)
    known = accounts.student(service.store, sub.student) if who.is_staff else None
    view = shown_to(service, who, [sub], deadlines).get(sub.id)
    diagnosis = card_diagnosis(view.card) if view is not None else ""
    return render("submission.html.j2", who=who, sub=sub, state=state, same=request.query_params.get("same") == "1",
                  card=view.card if view else None, held=view.held if view else None,
                  diagnosis=diagnosis, lateness=lateness(deadlines, sub),
                  # The grade shows the score: none while results are withheld.
                  grade=grade_view(service, deadlines, sub) if view is not None and view.held is None else None,
                  student_name=known.name if known else "", adjusted=request.query_params.get("adjusted") == "1",
                  code=code, top_tier=top, may_adjust=may_adjust(service, who), stall=stall_note(service) if state and state.state == "queued" else "",
                  title=service.exercises[sub.exercise].title if sub.exercise in service.exercises else sub.exercise)


def grade_view(service: Service, deadlines: Deadlines, sub: StoredSubmission) -> dict[str, Any] | None:
    """How a graded submission's grade comes from its tests' score: less what the late policy takes off,
    plus an instructor's adjustment and why. None when the grade is the score (or there is none)."""
    if sub.card is None or sub.card.status == "error":
        return None
    adjustment = service.store.adjustments().get((sub.student, sub.exercise))
    deduction = deadlines.deduction(sub)
    if adjustment is None and not deduction:
        return None
    added = adjustment.points if adjustment else 0.0
    return {"raw": sub.card.score, "deduction": points(deduction), "adjustment": points(added),
            "comment": adjustment.comment if adjustment else "", "by": accounts.named_by(service.store, adjustment.by) if adjustment else "",
            # Made on another submission of the same exercise: it follows the student's grade, said so.
            "carried_from": adjustment.submission_id if adjustment and adjustment.submission_id not in (None, sub.id)
            else None,
            "final": final_score(sub.card, deduction, added), "max": sub.card.max_score}


def lateness(deadlines: Deadlines, sub: StoredSubmission) -> str:
    """What a late submission's page says of it: by how much it came after its student's due date, as
    the dates are now ("" when on time)."""
    due = deadlines.due_for(sub.student, sub.exercise)
    if due is None or not deadlines.is_late(sub):
        return ""
    by = (datetime.fromisoformat(sub.submitted_at) - due).total_seconds()
    return f"Late: handed in {exercise_page.how_long(by)} after the due date, {exercise_page.moment_text(due)}."


def stall_note(service: Service) -> str:
    """What a queued submission's page says when no grader takes work: for how long, and why where the
    queue can tell ("" while the queue moves and nothing is wrong)."""
    stalled = jobs.stalled_for(service.store)
    try:
        problems = service.dispatcher.health()
    except Exception:
        problems = ["The queue cannot say why."]
    if stalled is None and not problems:
        return ""
    since = f"No grader has taken work for {exercise_page.how_long(stalled)}." if stalled is not None \
        else "Grading is held up."
    return " ".join([since, *problems, "Your submission is kept and is graded as soon as a grader is back: you need "
                                       "not submit again."])


def report(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    from grader.report import render_html

    assert who is not None
    sub = submission_for(service, who, request.path_params["id"])
    view = shown_to(service, who, [sub]).get(sub.id)
    if view is None:
        return RedirectResponse(f"/submissions/{sub.id}", status_code=303)
    return HTMLResponse(render_html(view.card, back=(f"/submissions/{sub.id}", f"← Submission {sub.id}"),
                                    held=view.held.view() if view.held else None))


def history(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert who is not None and who.student
    mine = service.store.submissions(student=who.student)
    deadlines = deadlines_of(service)
    return render("history.html.j2", who=who, student=who.student, known=None, answers=[], extensions=[],
                  history=list(reversed(mine)), late=late_ids(deadlines, mine),
                  shown=shown_to(service, who, mine, deadlines))
