"""The web application: routes, sign-in, the student's and the instructor's pages.

Every page is rendered on the server from Jinja templates (autoescaped), with no script; every form
carries the session's CSRF token (the sign-in form, before any session, a token its page set as a cookie);
the cookies are HttpOnly, SameSite and, behind an https address, Secure. Nothing a request
sends is ever used as a path on disk: exercises are looked up by name in the list loaded at start,
submissions and students by their id in the store, the instructor's site files by name in the site
built in memory.
"""

from __future__ import annotations

import functools
import hmac
import logging
import math
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Scope

import grader
from grader.core.exercise import Exercise, exercise_fingerprint
from grader.core.validate import Rejected, validate
from grader.course.deadlines import Deadlines
from grader.course.gradebook import final_score, pick, points
from grader.course.store import Store, StoredSubmission, StoreError, TooSoon
from grader.course.terms import TermsError
from grader.diagnosis.counts import MisconceptionCount, misconception_counts
from grader.diagnosis.words import card_diagnosis
from grader.service import accounts, jobs
from grader.service.recent_sessions import RecentSessions
from grader.service.spool import Spool
from grader.web import exercise_page, release, terms_page
from grader.web.access_log import AccessLog
from grader.web.partial_form import whole_fields
from grader.web.security import Guard

log = logging.getLogger("grader.web")
COOKIE = "grader_session"
# The sign-in form's CSRF token, set by the link's page: there is no session (and no session token) yet.
SIGNIN_COOKIE = "grader_csrf"
# The links an instructor's action just made, carried to the dashboard it redirects to and shown there once.
NEW_LINKS_COOKIE = "grader_new_links"
NEW_LINKS_SECONDS = 120
TOKEN = re.compile(r"[A-Za-z0-9_-]{20,64}")  # what secrets.token_urlsafe makes
TEMPLATES = Path(__file__).resolve().parent / "templates"
DEFAULT_INTERVAL_S = 30.0
DEFAULT_MAX_REQUEST = 1024 * 1024
MEDIA = {"html": "text/html; charset=utf-8", "csv": "text/csv; charset=utf-8", "json": "application/json"}


class Dispatcher(Protocol):
    def enqueue(self, submission_id: int) -> None: ...

    def health(self) -> list[str]:
        """What keeps the graders from taking work now, a plain sentence each (none when they can)."""
        ...


@dataclass
class Service:
    store: Store
    dispatcher: Dispatcher
    exercises: dict[str, Exercise]
    base_url: str
    submission_interval_s: float = DEFAULT_INTERVAL_S
    max_request_bytes: int = DEFAULT_MAX_REQUEST
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(timezone.utc))
    # Where a submission waits while the store is away (None: it is refused with the outage page), and
    # what this process last read from the store to take it then: recent sessions, the deadlines.
    spool: Spool | None = None
    sessions: RecentSessions = field(default_factory=RecentSessions)
    known_deadlines: Deadlines | None = None

    def link(self, token: str) -> str:
        return f"{self.base_url.rstrip('/')}/signin/{token}"

    @property
    def secure(self) -> bool:
        """Whether browsers reach the service over TLS (its public address is https), so that its cookies
        must never travel in clear."""
        return self.base_url.lower().startswith("https://")

    def interval(self, exercise: Exercise) -> float:
        own = exercise.web.submission_interval_s
        return self.submission_interval_s if own is None else own


@functools.lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals["grader_version"] = grader.__version__
    return env


class Page(Exception):
    """Stop handling and answer with a message page (a refusal, a problem with the form...)."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(environment().get_template(name).render(**context), status_code=status)


def message_page(who: accounts.Session | None, status: int, title: str, message: str) -> HTMLResponse:
    return render("message.html.j2", status=status, who=who, title=title, message=message)


def set_cookie(service: Service, response: Response, name: str, value: str, *, path: str = "/",
               max_age: int | None = None, samesite: Literal["lax", "strict"] = "lax") -> None:
    """Every cookie of the service: never readable by a script, and Secure behind an https address."""
    response.set_cookie(name, value, max_age=max_age, path=path, httponly=True, secure=service.secure,
                        samesite=samesite)


def delete_cookie(service: Service, response: Response, name: str, path: str = "/") -> None:
    response.delete_cookie(name, path=path, httponly=True, secure=service.secure)


def text_field(form: FormData, name: str) -> str:
    """A form's text field ("" when missing, or sent as a file)."""
    value = form.get(name)
    return value if isinstance(value, str) else ""


# -- plumbing: every handler runs in a thread (the store is synchronous) with the session ------------------

Handler = Callable[[Service, Request, accounts.Session | None, FormData | None], Response]


def route(path: str, methods: tuple[str, ...] = ("GET",), role: str | None = None,
          signin_form: bool = False, outage: bool = False) -> Callable[[Handler], Route]:
    """A route whose handler gets the session (None when signed out); `role` restricts it; POSTs
    need the session's CSRF token, or with `signin_form` the sign-in page's (there is no session yet).
    With `outage` (the submit route alone), a session this process verified recently stands in for the
    store's while the store cannot be reached (see grader.service.recent_sessions)."""
    def wrap(handler: Handler) -> Route:
        async def endpoint(request: Request) -> Response:
            service: Service = request.app.state.service
            form = await request.form(max_files=2, max_fields=50) if request.method == "POST" else None
            try:
                return await run_in_threadpool(call, service, request, form)
            finally:
                if form is not None:
                    await form.close()

        def call(service: Service, request: Request, form: FormData | None) -> Response:
            token = request.cookies.get(COOKIE)
            try:
                who = accounts.session(service.store, token)
            except (OperationalError, InterfaceError):
                if not outage or service.spool is None:
                    raise  # the outage page
                # Sound while the store is away: no session can be revoked or signed out without it.
                who = service.sessions.recall(token)
                if who is None:
                    from grader.web.outage import not_received

                    return not_received(request, form)
            else:
                service.sessions.remember(token, who)
            try:
                if role and (who is None or (role == "instructor" and not who.is_instructor)
                             or (role == "student" and who.student is None)):
                    raise Page(403 if who else 401, "Not for you",
                               "Sign in with your personal link to see this page." if who is None
                               else "This page is not part of your account.")
                if form is not None and not form_token_ok(request, who, form, signin_form):
                    raise Page(403, "Form expired", "This form is out of date or did not come from this site. "
                                                     "Go back, reload the page and try again.")
                return handler(service, request, who, form)
            except Page as page:
                return message_page(who, page.status, page.title, page.message)
            except StoreError as exc:
                return message_page(who, 400, "Not possible", str(exc))

        return Route(path, endpoint, methods=list(methods))
    return wrap


def form_token_ok(request: Request, who: accounts.Session | None, form: FormData, signin_form: bool) -> bool:
    sent = text_field(form, "csrf")
    if signin_form:
        # Double submit: the token must come back both as the cookie the sign-in page set and in the form.
        # A page of another site can send the form but neither read that cookie nor make the browser send
        # it (SameSite=Strict), so it cannot sign anyone in.
        cookie = request.cookies.get(SIGNIN_COOKIE, "")
        return bool(TOKEN.fullmatch(cookie)) and hmac.compare_digest(cookie.encode(), sent.encode())
    return who is not None and who.csrf_ok(sent)


def exercise_of(service: Service, slug: str) -> Exercise:
    exercise = service.exercises.get(slug)
    if exercise is None:
        raise Page(404, "No such exercise", "There is no exercise with that name.")
    return exercise


def whole_number(text: str, most_digits: int) -> int | None:
    """`text` as a number when it is one in ASCII digits (str.isdigit takes "²", which int() refuses)."""
    return int(text) if re.fullmatch(f"[0-9]{{1,{most_digits}}}", text) else None


def submission_for(service: Service, who: accounts.Session, raw_id: str) -> StoredSubmission:
    """A submission the signed-in person may see: their own, or any for an instructor."""
    number = whole_number(raw_id, 11)
    sub = service.store.submission(number) if number is not None else None
    if sub is None or (not who.is_instructor and sub.student != who.student):
        raise Page(404, "No such submission", "There is no submission of yours with that number.")
    return sub


# -- signing in and out --------------------------------------------------------------------------------

LINK_NOT_VALID = ("Link not valid", "This sign-in link is not valid: it was revoked, or it could be used only "
                                    "once. Ask your instructor for a new one.")


def signin(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """GET: the link's page, naming whom it signs in, with a button; opening a link (a chat's preview, a
    mail scanner, a page of another site sending the browser there) signs nobody in and uses nothing up.
    POST (the button): signs in. A session of another account open in this browser is never replaced
    silently: the page says who is signed in and asks for the switch, a button of its own; the account
    signed in already is taken to its pages, with nothing used up."""
    token = request.path_params["token"]
    holder = accounts.link_holder(service.store, token) if len(token) < 100 else None
    if holder is None:
        raise Page(403, *LINK_NOT_VALID)
    if who is not None and who.account == holder.account:
        return RedirectResponse("/", status_code=303)
    if form is None:
        return signin_page(service, request, who, holder, token)
    if who is not None and not who.csrf_ok(text_field(form, "switch")):
        # The switch carries the open session's own token, so only the page that named that session
        # (not a form sent from elsewhere, nor one shown before another sign-in) replaces it.
        return RedirectResponse(f"/signin/{token}", status_code=303)
    return signed_in_response(service, request, token)


def signin_page(service: Service, request: Request, who: accounts.Session | None, holder: accounts.LinkHolder,
                token: str) -> Response:
    """The page of a link, with the sign-in form's token as a cookie (kept when it has one: pages open in
    two tabs both work)."""
    csrf = request.cookies.get(SIGNIN_COOKIE, "")
    if not TOKEN.fullmatch(csrf):
        csrf = secrets.token_urlsafe(24)
    response = render("signin.html.j2", who=who, holder=holder, token=token, csrf=csrf)
    set_cookie(service, response, SIGNIN_COOKIE, csrf, path="/signin", samesite="strict")
    return response


def signed_in_response(service: Service, request: Request, token: str) -> Response:
    session = accounts.sign_in(service.store, token)
    if session is None:
        raise Page(403, *LINK_NOT_VALID)
    # The session this browser had, one the person chose to switch away from, ends with the switch.
    accounts.sign_out(service.store, request.cookies.get(COOKIE))
    response = RedirectResponse("/", status_code=303)
    set_cookie(service, response, COOKIE, session, max_age=accounts.SESSION_SECONDS)
    return response


def signout(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    accounts.sign_out(service.store, request.cookies.get(COOKIE))
    service.sessions.forget(request.cookies.get(COOKIE))
    response = RedirectResponse("/", status_code=303)
    delete_cookie(service, response, COOKIE)
    return response


# -- students ---------------------------------------------------------------------------------------------

def home(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    if who is None:
        return render("signed_out.html.j2", status=401, who=None)
    if who.is_instructor:
        return RedirectResponse("/instructor", status_code=303)
    history = service.store.submissions(student=who.student)
    deadlines = deadlines_of(service)
    dates = {slug: deadline_of(service, deadlines, who.student or "", slug) for slug in service.exercises}
    return render("home.html.j2", who=who, exercises=list(service.exercises.values()), dates=dates,
                  history=list(reversed(history)), late=late_ids(deadlines, history),
                  shown=shown_to(service, who, history, deadlines))


def deadline_of(service: Service, deadlines: Deadlines, student: str, slug: str) -> dict | None:
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
    exercise = exercise_of(service, request.path_params["slug"])
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
    if who.is_instructor:
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
    exercise = exercise_of(service, request.path_params["slug"])
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
        return store_submission(service, request, who, exercise, content)
    except (OperationalError, InterfaceError):
        if service.spool is None:
            raise  # the outage page
        from grader.web.outage import spooled_submission

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
    a student, before their exercise's results are released, without the hidden suites'; an instructor, all."""
    if who is None or who.is_instructor:
        return release.shown(subs, None, service.clock(), service.exercises)
    deadlines = deadlines or deadlines_of(service)
    return release.shown(subs, deadlines.terms, service.clock(), service.exercises, deadlines.due_for)


def extension_row(deadlines: Deadlines, student: str, exercise: Exercise) -> dict[str, Any]:
    """An exercise with dates, as the instructor's page of a student shows it: the student's due date,
    whether it is their own, and the value the form's date field starts from (in the due date's zone)."""
    due = deadlines.due_for(student, exercise.slug)
    return {"exercise": exercise, "due": exercise_page.moment_text(due) if due else "",
            "own": (student, exercise.slug) in deadlines.extensions,
            "value": due.strftime("%Y-%m-%dT%H:%M") if due else "",
            "zone": exercise_page.moment_text(due).rsplit(" ", 1)[-1] if due else "UTC"}


def wait_seconds(ready: datetime, now: datetime) -> int:
    """Whole seconds until `ready`, at least 1: what a student waits, in the unit they count."""
    return max(1, math.ceil((ready - now).total_seconds()))


def tier_for(exercise: Exercise, plan: str) -> str:
    """The exercise's tier a student's plan grades on: the tier of that name where the exercise has
    one; else, for premium, the tier that runs the most suites, and for free the first declared."""
    if plan in exercise.tiers:
        return plan
    return exercise.top_tier if plan == "premium" else next(iter(exercise.tiers))


def enqueue(service: Service, submission_id: int) -> None:
    """Tell the graders; if the queue is away, the submission is stored as queued all the same and
    the queue's watcher sends it once the queue is back."""
    try:
        service.dispatcher.enqueue(submission_id)
    except Exception:
        log.exception("submission %s stored but not sent to the queue yet", submission_id)


def solution(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert who is not None
    exercise = exercise_of(service, request.path_params["slug"])
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
    known = accounts.student(service.store, sub.student) if who.is_instructor else None
    view = shown_to(service, who, [sub], deadlines).get(sub.id)
    diagnosis = card_diagnosis(view.card) if view is not None else ""
    return render("submission.html.j2", who=who, sub=sub, state=state, same=request.query_params.get("same") == "1",
                  card=view.card if view else None, held=view.held if view else None,
                  diagnosis=diagnosis, lateness=lateness(deadlines, sub),
                  # The grade shows the score: none while results are withheld.
                  grade=grade_view(service, deadlines, sub) if view is not None and view.held is None else None,
                  student_name=known.name if known else "", adjusted=request.query_params.get("adjusted") == "1",
                  code=code, top_tier=top, stall=stall_note(service) if state and state.state == "queued" else "",
                  title=service.exercises[sub.exercise].title if sub.exercise in service.exercises else sub.exercise)


def grade_view(service: Service, deadlines: Deadlines, sub: StoredSubmission) -> dict[str, Any] | None:
    """How a graded submission's grade comes from its tests' score: less what the late policy takes off,
    plus an instructor's adjustment and why. None when the grade is the score (or there is none)."""
    if sub.card is None or sub.card.status == "error":
        return None
    adjustment = service.store.adjustments().get(sub.id)
    deduction = deadlines.deduction(sub)
    if adjustment is None and not deduction:
        return None
    added = adjustment.points if adjustment else 0.0
    return {"raw": sub.card.score, "deduction": points(deduction), "adjustment": points(added),
            "comment": adjustment.comment if adjustment else "", "by": adjustment.by if adjustment else "",
            "final": final_score(sub.card, deduction, added), "max": sub.card.max_score}


def adjust(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """An instructor's points added to (or taken from) a submission's grade, with why: the student sees both,
    and gradebooks show them apart from the tests' score. 0 points and no comment take it back."""
    assert who is not None and form is not None
    sub = submission_for(service, who, request.path_params["id"])
    typed, comment = text_field(form, "points").strip(), " ".join(text_field(form, "comment").split())[:500]
    try:
        added = float(typed or "0")
    except ValueError:
        raise Page(400, "Not a number", f"The points to add (or take off, with a minus) are a number, not "
                                        f"{typed[:20]!r}.") from None
    if not math.isfinite(added) or abs(added) > 10_000:
        raise Page(400, "Not possible", "The points to add or take off are a number within ±10000.")
    if added and not comment:
        raise Page(400, "Say why", "An adjustment needs a comment: the student reads it beside their grade.")
    service.store.adjust(sub.id, round(added, 2), comment, who.by)
    return RedirectResponse(f"/submissions/{sub.id}?adjusted=1#grade", status_code=303)


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


# -- instructors ----------------------------------------------------------------------------------------

def dashboard(service: Service, request: Request, who: accounts.Session | None, form: FormData | None,
              new_links: list[tuple[str, str]] | None = None, notice: str = "", status: int = 200,
              roster_text: str = "", problem: str = "", roster_problems: list[str] | None = None) -> Response:
    if form is None:  # the page an action redirected to: what it did, and the links it made, shown once
        new_links = shown_once(service, request)
        notice = notice or done_notice(service, request, bool(new_links))
    subs = service.store.submissions()
    counts: dict[str, int] = {}
    for sub in subs:
        counts[sub.state] = counts.get(sub.state, 0) + 1
    predictions = {slug: prediction_tally(exercise, accounts.prediction_counts(service.store, slug))
                   for slug, exercise in service.exercises.items() if exercise.prediction is not None}
    releases = release.release_rows(deadlines_of(service).terms, service.clock())
    response = render("instructor.html.j2", status, who=who, students=accounts.students(service.store),
                      releases=releases, policies=SITE_POLICIES,
                      exercises=list(service.exercises.values()), counts=counts, total=len(subs),
                      grading_problems=grading_problems(service), predictions=predictions, misconceptions=misconceptions_by_exercise(subs),
                      stale=stale_scorecards(service, subs), new_links=new_links or [], notice=notice,
                      terms={slug: terms_page.summary(t, service.clock()) for slug, t in deadlines_of(service).terms.items()},
                      roster_text=roster_text, problem=problem, roster_problems=roster_problems or [],
                      spooled=service.spool.count() if service.spool is not None else 0,
                      lti=lti_panel(service))
    if NEW_LINKS_COOKIE in request.cookies:
        delete_cookie(service, response, NEW_LINKS_COOKIE, path="/instructor")
    return response


# What the dashboard says after an action that redirected to it (post/redirect/get), by the action's name.
DONE = {
    "tier": "{student} is now {tier}.",
    "link": "New sign-in link for {student}: the old one no longer works, and {student} is signed out.",
    "revoke": "The sign-in link of {student} is revoked, and {student} is signed out: only a new link lets "
              "them in again.",
    "instructor-link": "A new instructor sign-in link: it works once.",
    "released": "The results of {exercise} are released: its students see every result and their score now.",
    "withheld": "The results of {exercise} are withheld again: its students see the open tests' results only, "
                "until you release them.",
}
SHOWN_ONCE = " The link was shown once, when it was made: if it was not kept, make another."


def after(service: Service, done: str, student: str = "", tokens: tuple[str, ...] = (),
          exercise: str = "") -> Response:
    """Post/redirect/get: an instructor's action ends on the dashboard's own address, which says what was
    done, so that a reload does not do it again. The links it made travel to that page in a cookie for a
    moment and are shown once: they are not in the address (nor in the history, nor in a log)."""
    query = urlencode({"done": done, **({"student": student} if student else {}),
                       **({"exercise": exercise} if exercise else {})})
    response = RedirectResponse(f"/instructor?{query}", status_code=303)
    if tokens:
        set_cookie(service, response, NEW_LINKS_COOKIE, ".".join(tokens), path="/instructor",
                   max_age=NEW_LINKS_SECONDS, samesite="strict")
    return response


def done_notice(service: Service, request: Request, links_shown: bool) -> str:
    done = request.query_params.get("done", "")
    if done not in DONE:
        return ""
    student = accounts.student(service.store, request.query_params.get("student", ""))
    exercise = service.exercises.get(request.query_params.get("exercise", ""))
    if ("{student}" in DONE[done] and student is None) or ("{exercise}" in DONE[done] and exercise is None):
        return ""
    notice = DONE[done].format(student=student.id if student else "", tier=student.tier if student else "",
                               exercise=exercise.title if exercise else "")
    return notice + (SHOWN_ONCE if done in ("link", "instructor-link") and not links_shown else "")


def shown_once(service: Service, request: Request) -> list[tuple[str, str]]:
    """The links the action that redirected here made (the cookie it set), each only while it still signs
    someone in: a cookie made elsewhere shows no link that is not one."""
    links = []
    for token in request.cookies.get(NEW_LINKS_COOKIE, "").split(".")[:10]:
        holder = accounts.link_holder(service.store, token) if TOKEN.fullmatch(token) else None
        if holder is not None:
            links.append((holder.student or "instructor", service.link(token)))
    return links


def grading_problems(service: Service) -> list[str]:
    """What keeps the graders from taking work, as the queue says it, for the dashboard."""
    try:
        return service.dispatcher.health()
    except Exception:
        log.exception("asking the graders how they are failed")
        return ["The queue cannot say how its graders are."]


def misconceptions_by_exercise(subs: list[StoredSubmission]) -> dict[str, list[MisconceptionCount]]:
    """Per exercise, students per misconception their latest graded submission looks like."""
    latest = pick(subs, "latest")
    return {exercise: misconception_counts([sub.card for (_, slug), sub in latest.items()
                                            if slug == exercise and sub.card is not None])
            for exercise in sorted({slug for _, slug in latest})}


def prediction_tally(exercise: Exercise, counts: dict[str, int]) -> dict[str, Any]:
    """The answers to the exercise's question: each choice, in its order, with how many chose it and
    whether it is the right one (an answer stored under a choice since reworded is counted apart)."""
    assert exercise.prediction is not None
    choices = exercise.prediction.choices
    rows = [{"choice": c, "count": counts.get(c, 0), "right": i == exercise.prediction.answer, "reworded": False}
            for i, c in enumerate(choices)]
    rows += [{"choice": c, "count": n, "right": False, "reworded": True} for c, n in counts.items() if c not in choices]
    total = sum(counts.values())
    return {"rows": rows, "total": total,
            "right": sum(r["count"] for r in rows if r["right"])}


def stale_scorecards(service: Service, subs: list[StoredSubmission]) -> dict[str, int]:
    """For each exercise, how many current scorecards another grader or another version of its suites and
    reference gave (their fingerprint is not the exercise's now): a regrade brings them up to date."""
    current = {slug: exercise_fingerprint(exercise) for slug, exercise in service.exercises.items()}
    stale: dict[str, int] = {}
    for sub in subs:
        if sub.card is not None and sub.exercise in current and sub.card.exercise_fingerprint != current[sub.exercise]:
            stale[sub.exercise] = stale.get(sub.exercise, 0) + 1
    return stale


def roster(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert form is not None
    upload = form.get("file")
    pasted = str(form.get("csv", ""))
    try:
        text = accounts.decode_roster(upload.file.read()) if isinstance(upload, UploadFile) and upload.filename \
            else pasted
        made = accounts.import_roster(service.store, text)
    except StoreError as refused:
        # The roster is refused whole: the text pasted stays in the form, to be corrected where it is
        # wrong, every wrong line named at once.
        problems = refused.problems if isinstance(refused, accounts.RosterError) else [str(refused)]
        if len(problems) == 1:
            return dashboard(service, request, who, form, status=400, roster_text=pasted,
                             problem=f"Roster not imported: {problems[0]}")
        return dashboard(service, request, who, form, status=400, roster_text=pasted, roster_problems=problems,
                         problem=f"Roster not imported: {len(problems)} problems, each to correct before "
                                 "importing it again:")
    links = [(sid, service.link(token)) for sid, token in made if token]
    return dashboard(service, request, who, form, links, f"{len(made)} student(s) imported.")


def student_action(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert form is not None
    student_id = known_student(service, request).id
    action = request.path_params["action"]
    if action == "tier":
        accounts.set_tier(service.store, student_id, text_field(form, "tier"))
        return after(service, "tier", student_id)
    if action == "extension":
        return give_extension(service, request, who, form, student_id)
    raise Page(404, "No such action", "Unknown action.")


def known_student(service: Service, request: Request) -> accounts.Student:
    known = accounts.student(service.store, request.path_params["student"])
    if known is None:
        raise Page(404, "No such student", "There is no student with that id.")
    return known


def asked_first(request: Request, who: accounts.Session | None, form: FormData | None, student: accounts.Student,
                action: str, title: str, lines: list[str], button: str) -> Response | None:
    """An action that signs a student out is never one click on the dashboard: GET shows what it does with
    its button; a POST that does not come from that button (no `confirm` naming the student) is sent to
    that page. None once confirmed."""
    if form is not None and text_field(form, "confirm") == student.id:
        return None
    if form is not None:
        return RedirectResponse(request.url.path, status_code=303)
    return render("confirm.html.j2", who=who, student=student.id, action=action, title=title, lines=lines,
                  button=button)


def named(student: accounts.Student) -> str:
    return f"{student.id} ({student.name})" if student.name else student.id


def new_student_link(service: Service, request: Request, who: accounts.Session | None,
                     form: FormData | None) -> Response:
    """A new link for a student, after the page that says it signs them out: the old link stops working."""
    student = known_student(service, request)
    ask = asked_first(request, who, form, student, "link", f"A new sign-in link for {named(student)}?",
                      [f"{student.id}'s current link stops working, and {student.id} is signed out on every device "
                       "where it was used.",
                       f"The new link is shown once, on the dashboard: send it to {student.id}."],
                      f"Make a new link and sign {student.id} out")
    if ask is not None:
        return ask
    accounts.revoke_links(service.store, student.id)
    service.sessions.forget_student(student.id)
    return after(service, "link", student.id, (accounts.new_link(service.store, "student", student.id),))


def revoke_student(service: Service, request: Request, who: accounts.Session | None,
                   form: FormData | None) -> Response:
    """Revoking a student's link, after the page that says it signs them out."""
    student = known_student(service, request)
    ask = asked_first(request, who, form, student, "revoke", f"Revoke the sign-in link of {named(student)}?",
                      [f"{student.id}'s link stops working, and {student.id} is signed out on every device. "
                       f"Only a new link lets {student.id} in again."] if student.link_active else
                      [f"{student.id} has no active sign-in link: there is nothing to revoke."],
                      f"Revoke and sign {student.id} out" if student.link_active else "")
    if ask is not None:
        return ask
    accounts.revoke_links(service.store, student.id)
    service.sessions.forget_student(student.id)
    return after(service, "revoke", student.id)


def give_extension(service: Service, request: Request, who: accounts.Session | None, form: FormData,
                   student_id: str) -> Response:
    """The student's own due date for an exercise, from the form's date and time (read in the zone of the
    exercise's due date, as the form shows it); an empty date takes the extension back."""
    exercise = exercise_of(service, str(form.get("exercise", "")))
    typed = str(form.get("due", "")).strip()
    if not typed:
        service.store.set_extension(student_id, exercise.slug, None)
        return RedirectResponse(f"/instructor/students/{student_id}?extension=removed", status_code=303)
    zone = (exercise.web.due or exercise.web.closes or datetime.now(timezone.utc)).tzinfo
    try:
        due = datetime.strptime(typed, "%Y-%m-%dT%H:%M").replace(tzinfo=zone)
    except ValueError:
        raise Page(400, "Not a date", f"{typed[:40]!r} is not a date and time such as 2026-12-21T23:59.") from None
    service.store.set_extension(student_id, exercise.slug, due)
    return RedirectResponse(f"/instructor/students/{student_id}?extension=given", status_code=303)


def exercise_terms(service: Service, request: Request, who: accounts.Session | None, form: FormData | None,
                   ) -> Response:
    """GET: the exercise's dates, late policy and release as a form, beside every change made so far.
    POST: record what the form changes (with who changed it), then back to this page."""
    assert who is not None
    exercise = exercise_of(service, request.path_params["slug"])
    terms = deadlines_of(service).terms[exercise.slug]
    problem = ""
    if form is not None:
        try:
            changes = terms_page.changes_from(form, terms)
        except TermsError as wrong:
            problem = f"Nothing changed: {wrong}."
        else:
            service.store.set_exercise_terms(exercise.slug, changes, who.by)
            return RedirectResponse(f"/instructor/exercises/{exercise.slug}?saved={len(changes)}", status_code=303)
    saved = whole_number(request.query_params.get("saved", ""), 2)
    notice = "" if saved is None else "Nothing changed: the form held the terms in force." if not saved else (
        "Saved. Students' pages and the gradebooks follow the new terms now; no regrade is needed.")
    return render("exercise_terms.html.j2", 400 if problem else 200, who=who, exercise=exercise,
                  form=terms_page.form_view(exercise, terms), notice=notice, problem=problem,
                  history=terms_page.history_rows(service.store.exercise_term_history(exercise.slug)))


def release_results(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """The dashboard's "Release results": the exercise's students see every result and score from now."""
    return set_release(service, request, who, True)


def withhold_results(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """The dashboard's "Withhold again": back to the open tests' results only, until released again."""
    return set_release(service, request, who, False)


def set_release(service: Service, request: Request, who: accounts.Session | None, released: bool) -> Response:
    assert who is not None
    exercise = exercise_of(service, request.path_params["slug"])
    try:
        release.set_released(service.store, exercise, deadlines_of(service).terms[exercise.slug], released,
                             service.clock(), who.by)
    except release.NothingToRelease as exc:
        raise Page(400, "Not possible", str(exc)) from None
    return after(service, "released" if released else "withheld", exercise=exercise.slug)


def site_zip(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """The class site as a zip file to publish elsewhere: pseudonymous unless the form asks for names."""
    from grader.web.site_zip import site_archive

    assert form is not None
    policy = text_field(form, "policy") or "latest"
    if policy not in SITE_POLICIES:
        raise Page(400, "Not possible", f"The site counts the latest, best or on-time submission, not {policy[:40]!r}.")
    names = text_field(form, "names") == "1"
    data = site_archive(service.store, policy, not names, deadlines_of(service))
    filename = f"class-site-{policy}{'-names' if names else ''}.zip"
    return Response(data, media_type="application/zip",
                    headers={"content-disposition": f'attachment; filename="{filename}"'})


def instructor_link(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """A new one-time sign-in link for another instructor (or this one on another device)."""
    return after(service, "instructor-link", tokens=(accounts.new_link(service.store, "instructor"),))


def student_history(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    student_id = request.path_params["student"]
    known = accounts.student(service.store, student_id)
    if known is None:
        raise Page(404, "No such student", "There is no student with that id.")
    answers = accounts.predictions_of(service.store, student_id)
    theirs = service.store.submissions(student=student_id)
    deadlines = deadlines_of(service)
    dated = [e for e in service.exercises.values() if e.web.due is not None or e.web.closes is not None]
    return render("history.html.j2", who=who, student=student_id, known=known,
                  answers=[(service.exercises[slug], choice, right) for slug, (choice, right) in sorted(answers.items())
                           if slug in service.exercises],
                  extensions=[extension_row(deadlines, student_id, e) for e in dated],
                  history=list(reversed(theirs)), late=late_ids(deadlines, theirs),
                  shown=shown_to(service, who, theirs, deadlines))


def regrade(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """GET: what a regrade of the exercise would grade again, and what the newest gradings changed. POST
    (the page's button): queue them all, then back to this page, which follows the regrade as it goes."""
    from grader.service.regrade import regrade_summary

    exercise = exercise_of(service, request.path_params["slug"])
    if form is None:
        summary = regrade_summary(service.store, exercise.slug)
        asked = whole_number(request.query_params.get("queued", ""), 7)
        return render("regrade.html.j2", who=who, exercise=exercise, summary=summary, names=service.store.student_names(),
                      notice=regrade_notice(asked, summary.waiting))
    ids = [s.id for s in service.store.submissions(exercise.slug)]
    queued = jobs.requeue(service.store, ids)
    for submission_id in queued:
        enqueue(service, submission_id)
    return RedirectResponse(f"/instructor/regrade/{exercise.slug}?queued={len(queued)}", status_code=303)


def regrade_notice(queued: int | None, waiting: int) -> str:
    """What the regrade page says after its button queued `queued` submissions: under way while some
    still wait (the count from the store, not the one queued), done once none does."""
    if queued is None:
        return ""
    if waiting:
        return (f"{queued} submission(s) queued for regrading; {waiting} still waiting to be graded. This page "
                "shows each changed score as its grading ends (reload it).")
    return (f"The regrade is done: the {queued} submission(s) queued for regrading are graded again, and every "
            "changed score is listed below.")


# The overviews of the other policies, beside that of the latest: under their own folder, so that the
# site's relative links keep the policy.
POLICY_FOLDERS = ("best", "on-time")
SITE_POLICIES = ("latest", *POLICY_FOLDERS)


def site_file(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    from grader.course.deadlines import Deadlines
    from grader.course.publish import build_site

    name = request.path_params["name"]
    asked = request.query_params.get("policy")
    if asked in POLICY_FOLDERS and not name.startswith(f"{asked}/"):
        return RedirectResponse(f"/instructor/site/{asked}/{name}", status_code=303)
    folder, _, rest = name.partition("/")
    policy, name = (folder, rest) if folder in POLICY_FOLDERS else ("latest", name)
    files = build_site(service.store, policy, deadlines=Deadlines.of(service.exercises.values(), service.store),
                       back=("/instructor", "Dashboard"))
    if name not in files:  # a name in the site built in memory, never a path on disk
        raise Page(404, "No such page", "The class overview has no such page.")
    kind = name.rsplit(".", 1)[-1]
    headers = {} if kind == "html" else {"content-disposition": f'attachment; filename="{name.rsplit("/", 1)[-1]}"'}
    return Response(files[name], media_type=MEDIA.get(kind, "text/plain"), headers=headers)


def similarity(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """The similarity report of an exercise (grader.similarity), for instructors: the ranked pairs, or
    one pair side by side. Made from the store on each visit, so it follows new submissions."""
    from grader.similarity import compare, sources
    from grader.similarity.view import render_index, render_pair

    exercise = exercise_of(service, request.path_params["slug"])
    policy = "best" if request.query_params.get("policy") == "best" else "latest"
    documents = sources.from_store(service.store, exercise.slug, policy) + sources.reference(exercise)
    report = compare(documents, sources.given_code(exercise), exercise.slug)
    query = f"?policy={policy}"
    base = f"/instructor/similarity/{exercise.slug}"
    raw_rank = request.path_params.get("rank")
    if raw_rank is None:
        return HTMLResponse(render_index(report, f"{base}/{{rank}}{query}", policy, back=("/instructor", "Dashboard")))
    rank = whole_number(raw_rank, 6)
    if rank is None or not 1 <= rank <= len(report.pairs):
        raise Page(404, "No such pair", f"The similarity report of {exercise.slug} has no pair {raw_rank} now.")
    return HTMLResponse(render_pair(report, rank, base + query))


async def favicon(request: Request) -> Response:
    return Response(status_code=204)  # browsers ask for one; there is none, and that is no error


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
RETRY_AFTER_S = 30


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


def lti_missing(exc: ModuleNotFoundError) -> bool:
    """Whether the `lti` extra (PyJWT, cryptography) is what is missing: then the service has no LTI pages."""
    return (exc.name or "").partition(".")[0] in ("jwt", "cryptography")


def lti_panel(service: Service) -> dict[str, Any] | None:
    """The dashboard's LTI block (grader/lti): None without the extra or a platform registered."""
    try:
        from grader.lti.routes import dashboard_panel
    except ModuleNotFoundError as exc:
        if lti_missing(exc):
            return None
        raise
    return dashboard_panel(service)


def create_app(service: Service) -> AccessLog:
    routes = [
        Route("/favicon.ico", favicon),
        route("/")(home),
        route("/signin/{token}", ("GET", "POST"), signin_form=True)(signin),
        route("/signout", ("POST",), role="any")(signout),
        route("/history", role="student")(history),
        route("/exercises/{slug}", role="any")(exercise_view),
        route("/exercises/{slug}/prediction", ("POST",), role="student")(predict),
        route("/exercises/{slug}/submit", ("POST",), role="student", outage=True)(submit),
        route("/exercises/{slug}/solution", role="any")(solution),
        route("/submissions/{id}", role="any")(submission_view),
        route("/submissions/{id}/report", role="any")(report),
        route("/submissions/{id}/adjust", ("POST",), role="instructor")(adjust),
        route("/instructor", role="instructor")(dashboard),
        route("/instructor/roster", ("POST",), role="instructor")(roster),
        route("/instructor/students/{student}", role="instructor")(student_history),
        route("/instructor/students/{student}/link", ("GET", "POST"), role="instructor")(new_student_link),
        route("/instructor/students/{student}/revoke", ("GET", "POST"), role="instructor")(revoke_student),
        route("/instructor/students/{student}/{action}", ("POST",), role="instructor")(student_action),
        route("/instructor/regrade/{slug}", ("GET", "POST"), role="instructor")(regrade),
        route("/instructor/exercises/{slug}", ("GET", "POST"), role="instructor")(exercise_terms),
        route("/instructor/link", ("POST",), role="instructor")(instructor_link),
        route("/instructor/exercises/{slug}/release", ("POST",), role="instructor")(release_results),
        route("/instructor/exercises/{slug}/withhold", ("POST",), role="instructor")(withhold_results),
        route("/instructor/site.zip", ("POST",), role="instructor")(site_zip),
        route("/instructor/site/{name:path}", role="instructor")(site_file),
        route("/instructor/similarity/{slug}", role="instructor")(similarity),
        route("/instructor/similarity/{slug}/{rank}", role="instructor")(similarity),
    ]
    try:
        from grader.lti.routes import lti_routes
        routes += lti_routes()
    except ModuleNotFoundError as exc:
        if not lti_missing(exc):
            raise
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, OperationalError: store_unavailable,
                                                         InterfaceError: store_unavailable, Exception: server_fault})
    app.state.service = service
    return AccessLog(Guard(app, service.max_request_bytes, too_large_page=too_large_page(service)))
