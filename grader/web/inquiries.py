"""Grade inquiries: a student asks about a released grade (a submission, or one test of it) in a short
message; instructors and TAs see the queue, answer, ask for a regrade, resolve or reopen; the student reads
the thread and the grade as it stands. Every action is a POST that ends on the inquiry's page (303).

A student asks only about what they may see (grader.web.release): after their results are released, within
the window the course sets (grader.service.staff), and of one test only when that test is shown to them; a
test whose results were withheld again since is not named to them on the thread.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from grader.course.deadlines import Deadlines
from grader.course.store import StoredSubmission
from grader.service import accounts, jobs, staff
from grader.service import inquiries as store_inquiries
from grader.service.inquiries import MESSAGE_LIMIT, Inquiry, InquiryRefused
from grader.web import exercise_page
from grader.web.base import Page, Service, enqueue, render, text_field, whole_number
from grader.web.lookup import deadlines_of, shown_to, submission_for
from grader.web.release import StudentCard
from grader.web.staff import may_adjust
from grader.web.student import grade_view

NOT_RELEASED = ("Not released yet", "You can ask about a grade once its results are released to you.")


def refused(exc: InquiryRefused) -> Page:
    return Page(exc.status, exc.title, exc.message)


def window_closes(service: Service, deadlines: Deadlines, sub: StoredSubmission, days: int) -> datetime | None:
    """Until when the student may ask about the submission: `days` after the later of its grading and the
    release of its results to them (None: the course takes no inquiries)."""
    if days <= 0 or sub.card is None:
        return None
    try:
        graded = datetime.fromisoformat(sub.card.graded_at)
    except ValueError:  # a card without its moment: the window counts from the release alone
        graded = None
    moments = [graded] if graded is not None and graded.tzinfo is not None else []
    terms = deadlines.terms.get(sub.exercise)
    if terms is not None and terms.release == "on_release" and terms.released_at is not None:
        moments.append(terms.released_at)
    if terms is not None and terms.release == "after_due":
        due = deadlines.due_for(sub.student, sub.exercise)
        moments += [due] if due is not None else []
    start = max(moments, default=service.clock())
    return start + timedelta(days=days)


def askable(service: Service, who: accounts.Session, sub: StoredSubmission,
            deadlines: Deadlines) -> tuple[StudentCard, datetime]:
    """The student's view of the submission and until when they may ask, or the page that says why not."""
    view = shown_to(service, who, [sub], deadlines).get(sub.id)
    if view is None or view.held is not None or view.card.status != "graded":
        raise Page(403, *NOT_RELEASED)
    closes = window_closes(service, deadlines, sub, staff.inquiry_window_days(service.store))
    if closes is None:
        raise Page(403, "No grade inquiries", "This course takes no grade inquiries here: ask your instructor.")
    if service.clock() > closes:
        raise Page(403, "Too late to ask", f"Questions about this grade could be asked until "
                                           f"{exercise_page.moment_text(closes)}.")
    return view, closes


def ask(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """GET: the form to ask about a submission's grade (or one test of it). POST: open the inquiry."""
    assert who is not None and who.student
    sub = submission_for(service, who, request.path_params["id"])
    deadlines = deadlines_of(service)
    view, closes = askable(service, who, sub, deadlines)
    tests = {test.id: test.name for test in view.card.tests}
    if form is not None:
        about = text_field(form, "about")
        if about and about not in tests:
            raise Page(400, "No such test", "Choose a test of this submission from the list, or the whole "
                                            "submission.")
        try:
            made = store_inquiries.open_inquiry(service.store, sub.id, who.student, sub.exercise, about,
                                                tests.get(about, ""), text_field(form, "message"), who.by,
                                                service.clock())
        except InquiryRefused as exc:
            raise refused(exc) from None
        return RedirectResponse(f"/inquiries/{made}", status_code=303)
    return render("inquiry_ask.html.j2", who=who, sub=sub, tests=sorted(tests.items(), key=lambda t: t[1]),
                  closes=exercise_page.moment_text(closes), limit=MESSAGE_LIMIT, title=title_of(service, sub.exercise),
                  asked=store_inquiries.inquiries(service.store, submission_id=sub.id))


def title_of(service: Service, slug: str) -> str:
    exercise = service.exercises.get(slug)
    return exercise.title if exercise is not None else slug


def queue(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """An instructor's or TA's queue (the open ones by default, or the resolved, or all; who waited longest
    first), or a student's own inquiries (newest first), each test named only as the reader may see it."""
    assert who is not None
    state = request.query_params.get("state", "open")
    state = state if state in ("open", "resolved", "all") else "open"
    if who.is_staff:
        found = store_inquiries.inquiries(service.store, state=None if state == "all" else state)
        views: dict[int, StudentCard] = {}
    else:
        found = list(reversed(store_inquiries.inquiries(service.store, student=who.student)))
        views = shown_to(service, who, service.store.submissions(student=who.student))
    return render("inquiries.html.j2", who=who, state=state,
                  found=[row(service, who, i, views.get(i.submission_id)) for i in found],
                  counts=store_inquiries.counts(service.store) if who.is_staff else {},
                  window_days=staff.inquiry_window_days(service.store), ta_may_adjust=staff.ta_may_adjust(service.store),
                  most_days=staff.MOST_WINDOW_DAYS, saved=request.query_params.get("saved") == "1")


def row(service: Service, who: accounts.Session, found: Inquiry, view: StudentCard | None) -> dict[str, Any]:
    return {"inquiry": found, "title": title_of(service, found.exercise),
            "about": about_text(service, who, found, view)}


def about_text(service: Service, who: accounts.Session, found: Inquiry, view: StudentCard | None) -> str:
    """What the inquiry is about, as its reader may know it: a student is named a test only while its result
    is shown to them (`view`: their view of the submission now, None while it is not graded)."""
    if not found.test_id:
        return "the whole submission"
    if who.is_staff or (view is not None and view.held is None
                        and any(t.id == found.test_id for t in view.card.tests)):
        return f"the test {found.test_name}"
    return "one test" + (" (its results are withheld again for now)" if view is not None and view.held else "")


def inquiry_of(service: Service, who: accounts.Session, raw_id: str) -> Inquiry:
    number = whole_number(raw_id, 11)
    found = store_inquiries.inquiry(service.store, number) if number is not None else None
    if found is None or (not who.is_staff and found.student != who.student):
        raise Page(404, "No such inquiry", "There is no grade inquiry of yours with that number.")
    return found


def thread(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """An inquiry's thread, the grade as it stands now (as its reader may see it), and its forms."""
    assert who is not None
    found = inquiry_of(service, who, request.path_params["id"])
    sub = service.store.submission(found.submission_id)
    assert sub is not None
    deadlines = deadlines_of(service)
    view = shown_to(service, who, [sub], deadlines).get(sub.id)
    grade = grade_view(service, deadlines, sub) if view is not None and view.held is None else None
    closes = window_closes(service, deadlines, sub, staff.inquiry_window_days(service.store))
    student_may_write = found.state == "open" or (closes is not None and service.clock() <= closes)
    return render("inquiry.html.j2", who=who, inquiry=found, posts=store_inquiries.posts(service.store, found.id),
                  about=about_text(service, who, found, view), sub=sub, view=view, grade=grade,
                  title=title_of(service, sub.exercise), limit=MESSAGE_LIMIT,
                  may_write=who.is_staff or student_may_write, may_adjust=may_adjust(service, who),
                  done=request.query_params.get("done", ""))


def reply(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """A message on the thread: an answer (staff, who may resolve with it), or the student's follow-up,
    which reopens a resolved inquiry while the window is open (as a new question would)."""
    assert who is not None and form is not None
    found = inquiry_of(service, who, request.path_params["id"])
    now = service.clock()
    try:
        text = store_inquiries.message_text(text_field(form, "message"))
        if who.is_staff:
            resolve = text_field(form, "resolve") == "1"
            store_inquiries.add_post(service.store, found.id, "message", who.role, who.by, text, now,
                                     "resolved" if resolve else None)
            if resolve and found.state != "resolved":
                store_inquiries.add_post(service.store, found.id, "resolved", who.role, who.by, "", now)
            return RedirectResponse(f"/inquiries/{found.id}?done={'resolved' if resolve else 'answered'}#thread",
                                    status_code=303)
        sub = service.store.submission(found.submission_id)
        assert sub is not None
        deadlines = deadlines_of(service)
        if found.state != "open":
            askable(service, who, sub, deadlines)  # reopening is asking again: within the window only
        store_inquiries.add_post(service.store, found.id, "message", "student", who.by, text, now, "open")
        if found.state != "open":
            store_inquiries.add_post(service.store, found.id, "reopened", "student", who.by, "", now)
    except InquiryRefused as exc:
        raise refused(exc) from None
    return RedirectResponse(f"/inquiries/{found.id}?done=sent#thread", status_code=303)


def act(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """An instructor's or TA's action on an inquiry: resolve, reopen, or grade its submission again."""
    assert who is not None
    found = inquiry_of(service, who, request.path_params["id"])
    action, now = request.path_params["action"], service.clock()
    try:
        if action in ("resolve", "reopen"):
            state = "resolved" if action == "resolve" else "open"
            if found.state != state:
                store_inquiries.add_post(service.store, found.id, state if state == "resolved" else "reopened",
                                         who.role, who.by, "", now, state)
        elif action == "regrade":
            queued = jobs.requeue(service.store, [found.submission_id])
            for submission_id in queued:
                enqueue(service, submission_id)
            store_inquiries.add_post(service.store, found.id, "regrade", who.role, who.by, "", now)
        else:
            raise Page(404, "No such action", "Unknown action.")
    except InquiryRefused as exc:
        raise refused(exc) from None
    return RedirectResponse(f"/inquiries/{found.id}?done={action}#thread", status_code=303)
