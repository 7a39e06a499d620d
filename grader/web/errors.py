"""The service's own pages for what goes wrong: Starlette's refusals (no such page, a method a page does
not take), the store away (a 503 that says when to come back), a fault of ours (a 500 that shows nothing
of it), and a request over the size cap (a 413, or the exercise's page with the student's code kept).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from grader.core.exercise import Exercise
from grader.service import accounts
from grader.web.auth import COOKIE
from grader.web.base import RETRY_AFTER_S, Service, log, message_page, render
from grader.web.partial_form import whole_fields
from grader.web.student import exercise_view

HTTP_PAGES = {404: ("No such page", "There is no page at this address."),
              405: ("Not possible", "This page does not take that kind of request.")}


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, a method a page does not take, a form that cannot be
    read) as the service's pages rather than bare text."""
    assert isinstance(exc, HTTPException)
    service: Service = request.app.state.service
    who = await run_in_threadpool(accounts.session, service.store, request.cookies.get(COOKIE))
    title, message = HTTP_PAGES.get(exc.status_code, ("Not possible", str(exc.detail)))
    page = message_page(who, exc.status_code, title, message)
    page.headers.update(exc.headers or {})
    return page


# Said on every page but the submit route's while the store is away: only what is true whatever the page
# was (a submission sent now is kept only by the submit route, which says so on its own page).
STORE_AWAY = ("Back in a moment", "The service cannot reach its database right now (a restart or a network "
              "hiccup), so this page cannot be shown: try again in a minute. What is stored is safe, and "
              "grading resumes by itself once the database is back.")


async def store_unavailable(request: Request, exc: Exception) -> Response:
    """The store is away (a PostgreSQL restart, a lost connection): every page says so, as the service's own
    page with a 503 and when to come back, rather than a bare 500. No session is read: that needs the store."""
    log.warning("the store is unreachable: %s %s: %s", request.method, request.url.path,
                str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
    page = message_page(None, 503, *STORE_AWAY)
    page.headers["retry-after"] = str(RETRY_AFTER_S)
    return page


SERVER_FAULT = ("Something went wrong here", "The service could not show this page: the fault is ours, and it is "
                                            "in the server's log. What you submitted is kept; go back and try again.")


async def server_fault(request: Request, exc: Exception) -> Response:
    """Any other failure: the service's own page with a 500, never a bare text. Starlette logs the
    traceback; nothing of it is shown."""
    return message_page(None, 500, *SERVER_FAULT)


SUBMIT_PATH = re.compile(r"/exercises/([^/]+)/submit")


def too_large_page(service: Service) -> Callable[[Scope, bytes], Awaitable[Response]]:
    """The page `Guard` answers a body over the cap with, from the body's first bytes (at most the cap)."""
    async def page(scope: Scope, prefix: bytes) -> Response:
        return await run_in_threadpool(too_large_response, service, Request(scope), prefix)
    return page


def too_large_response(service: Service, request: Request, prefix: bytes) -> Response:
    """A request over the cap, as the service's own 413 page: the limits, how to send less and the way back.
    A student's submission whose code from the editor arrived whole (the file beside it was the large part)
    gets the exercise's page back with that code kept in the editor, as every refused submission does."""
    limit_kb = service.max_request_bytes // 1024
    who: accounts.Session | None = None
    exercise: Exercise | None = None
    try:
        who = accounts.session(service.store, request.cookies.get(COOKIE))
        found = SUBMIT_PATH.fullmatch(request.url.path)
        exercise = service.exercises.get(found.group(1)) if found and who is not None else None
        if exercise is not None and who is not None and who.student and request.method == "POST":
            fields = whole_fields(prefix, request.headers.get("content-type", ""), ("csrf", "code"))
            code = fields.get("code")
            if code is not None and who.csrf_ok(fields.get("csrf")):  # its own form, from its own session
                problem = (f"Nothing was submitted: what you sent was over {limit_kb} KiB, the most the service "
                           f"takes at once, most likely because of the file you chose to upload. A file of this "
                           f"exercise may be at most {exercise.max_submission_bytes // 1024} KiB: check that you "
                           f"chose {exercise.submission_file}, or leave out what makes it large. The code you had in "
                           "the editor is kept in the editor below: submit it, or upload a smaller file.")
                scoped = Request({**request.scope, "path_params": {"slug": exercise.slug}})
                return exercise_view(service, scoped, who, None, problem, 413, code=code.replace("\r\n", "\n"))
    except Exception:  # the store away, a page that failed: the plain page below still says what happened
        log.exception("the page of a request over the size cap")
        who, exercise = None, None
    return render("too_large.html.j2", status=413, who=who, limit_kb=limit_kb, exercise=exercise,
                  file_kb=exercise.max_submission_bytes // 1024 if exercise else 0)
