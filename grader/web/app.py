"""The web application: every route of `grader serve`, assembled.

Every page is rendered on the server from Jinja templates (autoescaped), with no script. Nothing a
request sends is ever used as a path on disk: exercises are looked up by name in the list loaded at
start, submissions and students by their id in the store, the instructor's site files by name in the
site built in memory. The pages live by who reads them: signing in (`auth`), students (`student`),
instructors (`instructor`), and what goes wrong (`errors`); `base` holds the `Service` they share.
The LTI pages (grader/lti, which stands above the web: its pages are made of the web's) are handed in
as `LtiPages` by whoever assembles the service, never looked for here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from grader.course.store import Store
from grader.web.access_log import AccessLog
from grader.web.auth import route, signin, signout
from grader.web.base import Service
from grader.web.errors import http_error, server_fault, store_unavailable, too_large_page
from grader.web.form_fields import CODE_CHARS, Field
from grader.web.inquiries import act, ask, queue, reply, thread
from grader.web.instructor import (
    adjust,
    class_gradebook,
    dashboard,
    exercise_terms,
    instructor_link,
    new_student_link,
    regrade,
    release_results,
    revoke_student,
    roster,
    similarity,
    site_file,
    site_zip,
    student_action,
    student_history,
    withhold_results,
)
from grader.web.security import Guard
from grader.web.staff import adjust_rights, course_settings, revoke_ta, staff_home, staff_student
from grader.web.student import exercise_view, history, home, predict, report, solution, submission_view, submit

__all__ = ["LtiPages", "Service", "create_app"]


async def favicon(request: Request) -> Response:
    return Response(status_code=204)  # browsers ask for one; there is none, and that is no error


class Stoppable(Protocol):
    def stop(self) -> None: ...


@dataclass(frozen=True)
class LtiPages:
    """What LTI adds to the service (grader/lti makes it, `grader.lti.mount.lti_pages`): its routes, the
    instructor dashboard's LTI block (`panel`: what it shows, None when no platform is registered), and
    what runs beside the service while it serves (`start`: the grades sent to the LMSs, stopped at the end)."""

    routes: list[Route]
    panel: Callable[[Store], dict[str, Any] | None]
    start: Callable[[Service], Stoppable]


def create_app(service: Service, lti: LtiPages | None = None) -> AccessLog:
    """The application of every page, the LTI ones with them when `lti` is given."""
    routes = [
        Route("/favicon.ico", favicon),
        route("/")(home),
        route("/signin/{token}", ("GET", "POST"), signin_form=True)(signin),
        route("/signout", ("POST",), role="any")(signout),
        route("/history", role="student")(history),
        route("/exercises/{slug}", role="any")(exercise_view),
        route("/exercises/{slug}/prediction", ("POST",), role="student",
              fields=[Field("choice", 3, required=True)])(predict),
        route("/exercises/{slug}/submit", ("POST",), role="student", outage=True,
              fields=[Field("code", CODE_CHARS), Field("upload", file=True)])(submit),
        route("/exercises/{slug}/solution", role="any")(solution),
        route("/submissions/{id}", role="any")(submission_view),
        route("/submissions/{id}/report", role="any")(report),
        route("/submissions/{id}/adjust", ("POST",), role="staff", rights=adjust_rights,
              fields=[Field("points", 20, required=True, label="points to add"),
                      Field("comment", 500, required=True, label="comment")])(adjust),
        route("/submissions/{id}/inquiry", ("GET", "POST"), role="student")(ask),
        route("/inquiries", role="any")(queue),
        route("/inquiries/{id}", role="any")(thread),
        route("/inquiries/{id}/reply", ("POST",), role="any")(reply),
        route("/inquiries/{id}/{action}", ("POST",), role="staff")(act),
        route("/staff", role="staff")(staff_home),
        route("/staff/students/{student}", role="staff")(staff_student),
        route("/instructor/inquiry-settings", ("POST",), role="instructor")(course_settings),
        route("/instructor/tas/{ta}/revoke", ("POST",), role="instructor")(revoke_ta),
        route("/instructor", role="instructor")(dashboard),
        route("/instructor/roster", ("POST",), role="instructor",
              fields=[Field("csv", CODE_CHARS, label="roster"), Field("file", file=True)])(roster),
        route("/instructor/students/{student}", role="instructor")(student_history),
        route("/instructor/students/{student}/link", ("GET", "POST"), role="instructor")(new_student_link),
        route("/instructor/students/{student}/revoke", ("GET", "POST"), role="instructor")(revoke_student),
        route("/instructor/students/{student}/{action}", ("POST",), role="instructor")(student_action),
        route("/instructor/regrade/{slug}", ("GET", "POST"), role="instructor")(regrade),
        route("/instructor/exercises/{slug}", ("GET", "POST"), role="instructor")(exercise_terms),
        route("/instructor/link", ("POST",), role="instructor")(instructor_link),
        route("/instructor/exercises/{slug}/release", ("POST",), role="instructor")(release_results),
        route("/instructor/exercises/{slug}/withhold", ("POST",), role="instructor")(withhold_results),
        route("/instructor/site.zip", ("POST",), role="instructor",
              fields=[Field("policy", 20), Field("names", 1)])(site_zip),
        route("/instructor/gradebook.csv", role="instructor")(class_gradebook),
        route("/instructor/site/{name:path}", role="instructor")(site_file),
        route("/instructor/similarity/{slug}", role="instructor")(similarity),
        route("/instructor/similarity/{slug}/{rank}", role="instructor")(similarity),
    ]
    routes += lti.routes if lti is not None else []
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, OperationalError: store_unavailable,
                                                         InterfaceError: store_unavailable, Exception: server_fault})
    app.state.service = service
    app.state.lti_panel = lti.panel if lti is not None else None  # read by the instructor's dashboard
    return AccessLog(Guard(app, service.max_request_bytes, too_large_page=too_large_page(service)))
