"""The submit route's pages while the store cannot be reached: the submission kept in the spool
(grader.service.spool) and said so, or refused with the reason and the code sent, to copy.

Apart from grader.web.student because nothing else there works without the store: the exercise's page,
which keeps a refused submission's code in its editor, needs it, so these pages show the code
themselves, and say only what is true while the database is away.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from grader.core.exercise import Exercise
from grader.course.deadlines import Deadlines
from grader.service import accounts
from grader.service.spool import SpoolFull
from grader.web import exercise_page
from grader.web.base import RETRY_AFTER_S, Service, log, render, text_field
from grader.web.lookup import not_open_yet, tier_for

KEPT = ("Kept until the database is back",
        "Your submission arrived while the service's database was away: it is kept on this server and will be "
        "stored and graded as soon as the database is back — you need not submit again; it will appear in your "
        "submissions then.")


def spooled_submission(service: Service, request: Request, who: accounts.Session, exercise: Exercise,
                       content: bytes) -> Response:
    """A submission that came while the store cannot be reached: the checks that need no store (those a
    normal submit makes, bar the question before the code: the editor is shown only once it is answered),
    "closed" by the last deadlines this process read, then kept in the spool and acknowledged (202)."""
    assert service.spool is not None and who.student
    code = content.decode("utf-8", "replace")
    if not content.strip():
        return away_page(who, 400, "Nothing to submit", "The submission is empty: paste your code or choose a file.",
                         exercise, code)
    if len(content) > exercise.max_submission_bytes:
        return away_page(who, 413, "Too large", f"Nothing was kept: a file of this exercise may be at most "
                         f"{exercise.max_submission_bytes // 1024} KiB.", exercise, code)
    deadlines = service.known_deadlines or Deadlines.of(service.exercises.values())
    not_yet = not_open_yet(deadlines, who.is_instructor, exercise, service.clock())
    if not_yet:
        return away_page(who, 404, "Not open yet", not_yet, None, None)
    if not deadlines.is_open(who.student, exercise.slug, service.clock()):
        closes = deadlines.closes_for(who.student, exercise.slug)
        assert closes is not None
        return away_page(who, 403, "Closed", f"This exercise closed at {exercise_page.moment_text(closes)}: it takes "
                         "no more submissions. Your instructor can give you an extension.", exercise, code)
    try:
        service.spool.keep(who.student, exercise.slug, tier_for(exercise, who.tier), exercise.submission_file,
                           content, service.clock())
    except SpoolFull as full:
        return away_page(who, 503, "Not kept", str(full), exercise, code)
    except OSError:
        log.exception("a submission could not be written to the spool %s", service.spool.folder)
        return away_page(who, 503, "Not kept", "The service's database is away and this server could not keep your "
                         "submission either. Nothing was kept: keep your code and submit it again in a minute.",
                         exercise, code)
    return away_page(who, 202, *KEPT, exercise, None)


NOT_RECEIVED = ("Not received", "Your submission could not be received: the service's database is away right now, "
                "and without it this server cannot tell who you are (you have not opened a page here in the last "
                "minutes). Nothing was kept: keep your code and submit it again in a minute.")


def not_received(request: Request, form: FormData | None) -> Response:
    """The submit route with the store away and a session this process does not know: the code typed is
    shown, to copy, since the exercise's page cannot be shown without the store."""
    code = text_field(form, "code") if form is not None else ""
    return away_page(None, 503, *NOT_RECEIVED, None, code or None)


def away_page(who: accounts.Session | None, status: int, title: str, message: str, exercise: Exercise | None,
              code: str | None) -> Response:
    """A page of the submit route while the store is away: what happened, and the code sent, when it was
    not kept, to copy (the exercise's page, which keeps it in the editor, needs the store)."""
    page = render("away.html.j2", status=status, who=who, title=title, message=message, exercise=exercise, code=code,
                  kept=status == 202)
    if status == 503:
        page.headers["retry-after"] = str(RETRY_AFTER_S)
    return page
