"""The teaching assistants' pages and the course's settings for them: a TA's dashboard (the grade
inquiries waiting, the students, the exercises), a student's submissions as a TA sees them, and the
instructor's form that says whether TAs adjust grades and how long students may ask about a grade.

What a TA may do is decided route by route (grader.web.app: `role="staff"` for what TAs share with
instructors); adjusting a grade also asks the course's setting, here (`adjust_rights`).
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from grader.service import accounts, inquiries, staff
from grader.web.base import Page, Service, render, text_field, whole_number
from grader.web.lookup import deadlines_of, late_ids, shown_to


def may_adjust(service: Service, who: accounts.Session | None) -> bool:
    """Whether this person adjusts grades: an instructor always, a TA where the course allows it."""
    return who is not None and (who.is_instructor or (who.is_ta and staff.ta_may_adjust(service.store)))


def adjust_rights(service: Service, who: accounts.Session | None) -> None:
    """The adjust route's right beyond its role (staff): a TA is refused unless the course lets TAs adjust."""
    if not may_adjust(service, who):
        raise Page(403, "Not for you", "In this course only an instructor adjusts grades.")


def staff_home(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """A TA's dashboard; an instructor's is /instructor."""
    assert who is not None
    if who.is_instructor:
        return RedirectResponse("/instructor", status_code=303)
    return render("staff.html.j2", who=who, inquiries=inquiries.counts(service.store),
                  students=accounts.students(service.store), exercises=list(service.exercises.values()),
                  may_adjust=may_adjust(service, who))


def staff_student(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """A student's submissions as a TA sees them: every result, no action of the instructor's."""
    student_id = request.path_params["student"]
    known = accounts.student(service.store, student_id)
    if known is None:
        raise Page(404, "No such student", "There is no student with that id.")
    theirs = service.store.submissions(student=student_id)
    deadlines = deadlines_of(service)
    return render("history.html.j2", who=who, student=student_id, known=known, answers=[], extensions=[],
                  history=list(reversed(theirs)), late=late_ids(deadlines, theirs),
                  shown=shown_to(service, who, theirs, deadlines))


def revoke_ta(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """The dashboard's "revoke" of a TA: their links stop working and they are signed out everywhere."""
    ta_id = request.path_params["ta"]
    if ta_id not in {t.id for t in staff.teaching_assistants(service.store)}:
        raise Page(404, "No such TA", "There is no teaching assistant with that id.")
    staff.revoke_ta(service.store, ta_id)  # (TAs never submit: no session of theirs is kept for an outage)
    return RedirectResponse("/instructor#tas", status_code=303)


def course_settings(service: Service, request: Request, who: accounts.Session | None, form: FormData | None,
                    ) -> Response:
    """The instructor's settings of grade inquiries and TAs (the form on /inquiries)."""
    assert form is not None
    typed = text_field(form, "window_days").strip()
    days = whole_number(typed, 3)
    if days is None or days > staff.MOST_WINDOW_DAYS:
        raise Page(400, "Not a number of days", f"The days students may ask about a released grade are a whole "
                                                f"number from 0 to {staff.MOST_WINDOW_DAYS}, not {typed[:20]!r}.")
    staff.set_setting(service.store, staff.INQUIRY_WINDOW_DAYS, str(days))
    staff.set_setting(service.store, staff.TA_MAY_ADJUST, "1" if text_field(form, "ta_may_adjust") == "1" else "0")
    return RedirectResponse("/inquiries?saved=1#settings", status_code=303)
