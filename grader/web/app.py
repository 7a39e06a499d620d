"""The web application: routes, sign-in, the student's and the instructor's pages.

Every page is rendered on the server from Jinja templates (autoescaped), with no script; every form
carries the session's CSRF token; the session cookie is HttpOnly and SameSite=Lax. Nothing a request
sends is ever used as a path on disk: exercises are looked up by name in the list loaded at start,
submissions and students by their id in the store, the instructor's site files by name in the site
built in memory.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

import grader
from grader.deadlines import Deadlines
from grader.diagnosis.counts import MisconceptionCount, misconception_counts
from grader.diagnosis.words import card_diagnosis
from grader.exercise import Exercise, exercise_fingerprint
from grader.gradebook import pick
from grader.service import accounts, jobs
from grader.store import Store, StoredSubmission, StoreError, TooSoon
from grader.web import exercise_page
from grader.web.access_log import AccessLog
from grader.web.security import Guard

log = logging.getLogger("grader.web")
COOKIE = "grader_session"
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

    def link(self, token: str) -> str:
        return f"{self.base_url.rstrip('/')}/signin/{token}"

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


# -- plumbing: every handler runs in a thread (the store is synchronous) with the session ------------------

Handler = Callable[[Service, Request, accounts.Session | None, FormData | None], Response]


def route(path: str, methods: tuple[str, ...] = ("GET",), role: str | None = None) -> Callable[[Handler], Route]:
    """A route whose handler gets the session (None when signed out); `role` restricts it; POSTs
    need the session's CSRF token."""
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
            who = accounts.session(service.store, request.cookies.get(COOKIE))
            try:
                if role and (who is None or (role == "instructor" and not who.is_instructor)
                             or (role == "student" and who.student is None)):
                    raise Page(403 if who else 401, "Not for you",
                               "Sign in with your personal link to see this page." if who is None
                               else "This page is not part of your account.")
                if form is not None and (who is None or not who.csrf_ok(form.get("csrf"))):  # type: ignore[arg-type]
                    raise Page(403, "Form expired", "This form is out of date or did not come from this site. "
                                                     "Go back, reload the page and try again.")
                return handler(service, request, who, form)
            except Page as page:
                return message_page(who, page.status, page.title, page.message)
            except StoreError as exc:
                return message_page(who, 400, "Not possible", str(exc))

        return Route(path, endpoint, methods=list(methods))
    return wrap


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
    """A student's link signs in at once. The instructor's signs in once, so opening it shows a button:
    a chat's preview or a mail scanner that opens the link (GET, HEAD) uses nothing up."""
    token = request.path_params["token"]
    one_time = accounts.is_one_time(service.store, token) if len(token) < 100 else None
    if one_time is None:
        raise Page(403, *LINK_NOT_VALID)
    if one_time:
        return render("signin.html.j2", who=who, token=token)
    return signed_in_response(service, token)


async def signin_confirmed(request: Request) -> Response:
    """The button of a one-time link: the only request that uses it up (no session yet, so no CSRF token:
    the link's secret is in the address)."""
    service: Service = request.app.state.service
    return await run_in_threadpool(signed_in_response, service, request.path_params["token"])


def signed_in_response(service: Service, token: str) -> Response:
    session = accounts.sign_in(service.store, token) if len(token) < 100 else None
    if session is None:
        return message_page(None, 403, *LINK_NOT_VALID)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(COOKIE, session, max_age=accounts.SESSION_SECONDS, httponly=True, samesite="lax",
                        secure=service.base_url.startswith("https:"), path="/")
    return response


def signout(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    accounts.sign_out(service.store, request.cookies.get(COOKIE))
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


# -- students ---------------------------------------------------------------------------------------------

def home(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    if who is None:
        return render("signed_out.html.j2", status=401, who=None)
    if who.is_instructor:
        return RedirectResponse("/instructor", status_code=303)
    history = service.store.submissions(student=who.student)
    return render("home.html.j2", who=who, exercises=list(service.exercises.values()),
                  history=list(reversed(history)), late=late_ids(deadlines_of(service), history))


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
    student = who.student or ""
    deadline = exercise_page.deadline_view(deadlines.due_for(student, exercise.slug),
                                           deadlines.closes_for(student, exercise.slug),
                                           (student, exercise.slug) in deadlines.extensions, service.clock())
    return render("exercise.html.j2", status=status, who=who, exercise=exercise, question=question,
                  deadline=deadline, late=late_ids(deadlines, mine), refused_code=refused_code,
                  answered=answered, statement=exercise_page.statement_html(exercise),
                  visible=exercise_page.visible_tests(exercise),
                  stub=code,
                  history=list(reversed(mine)), problem=problem,
                  solution_rule=exercise_page.solution_rule_text(web.solution),
                  solution_open=solution_allowed(service, who, exercise, mine),
                  editor_open=who.student is not None and (question is None or answered is not None)
                  and (deadline is None or deadline["open"]),
                  max_kb=exercise.max_submission_bytes // 1024)


def solution_allowed(service: Service, who: accounts.Session, exercise: Exercise,
                     mine: list[StoredSubmission]) -> bool:
    if who.is_instructor:
        return True
    if who.tier != "premium":
        return False
    cards = [s.card for s in mine if s.card is not None and s.card.status == "graded"]
    return exercise_page.solution_open(exercise.web.solution, bool(cards),
                                       any(c.max_score and c.score == c.max_score for c in cards))


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
    if exercise.prediction and accounts.prediction(service.store, who.student, exercise.slug) is None:
        raise Page(400, "Before you code", "Answer the exercise's question first.")
    upload, typed = form.get("upload"), form.get("code", "")
    if isinstance(upload, UploadFile) and upload.filename:
        content = upload.file.read(exercise.max_submission_bytes + 1)
    elif isinstance(typed, str):
        # A textarea comes back with CRLF line ends: keep the file as the student sees it.
        content = typed.replace("\r\n", "\n").encode("utf-8")
    else:
        raise Page(400, "Not a submission", "The code comes as text from the editor, or as a file in the upload field.")
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
                                         service.clock())
    except TooSoon as soon:
        return exercise_view(service, request, who, None,
                             f"You submitted less than {service.interval(exercise):g} s ago: you can submit again "
                             f"in {wait_seconds(soon.ready, service.clock())} s. Your code is still in the editor.", 429,
                             code=content.decode("utf-8", "replace"))
    if new:
        enqueue(service, submission_id)
    return RedirectResponse(f"/submissions/{submission_id}" + ("" if new else "?same=1"), status_code=303)


def deadlines_of(service: Service) -> Deadlines:
    return Deadlines.of(service.exercises.values(), service.store)


def late_ids(deadlines: Deadlines, subs: list[StoredSubmission]) -> set[int]:
    """The ids of the submissions that came in after their student's due date."""
    return {sub.id for sub in subs if deadlines.is_late(sub)}


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
        rule = exercise_page.solution_rule_text(exercise.web.solution)
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
    diagnosis = card_diagnosis(sub.card) if sub.card is not None else ""
    return render("submission.html.j2", who=who, sub=sub, state=state, same=request.query_params.get("same") == "1",
                  diagnosis=diagnosis,
                  code=code, top_tier=top, stall=stall_note(service) if state and state.state == "queued" else "",
                  title=service.exercises[sub.exercise].title if sub.exercise in service.exercises else sub.exercise)


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
    if sub.card is None:
        return RedirectResponse(f"/submissions/{sub.id}", status_code=303)
    return HTMLResponse(render_html(sub.card, back=(f"/submissions/{sub.id}", f"← Submission {sub.id}")))


def history(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert who is not None and who.student
    mine = service.store.submissions(student=who.student)
    return render("history.html.j2", who=who, student=who.student, known=None, answers=[], extensions=[],
                  history=list(reversed(mine)), late=late_ids(deadlines_of(service), mine))


# -- instructors ----------------------------------------------------------------------------------------

def dashboard(service: Service, request: Request, who: accounts.Session | None, form: FormData | None,
              new_links: list[tuple[str, str]] | None = None, notice: str = "", status: int = 200,
              roster_text: str = "", problem: str = "") -> Response:
    subs = service.store.submissions()
    counts: dict[str, int] = {}
    for sub in subs:
        counts[sub.state] = counts.get(sub.state, 0) + 1
    predictions = {slug: prediction_tally(exercise, accounts.prediction_counts(service.store, slug))
                   for slug, exercise in service.exercises.items() if exercise.prediction is not None}
    return render("instructor.html.j2", status, who=who, students=accounts.students(service.store),
                  exercises=list(service.exercises.values()), counts=counts, total=len(subs),
                  grading_problems=grading_problems(service),
                  predictions=predictions, misconceptions=misconceptions_by_exercise(subs),
                  stale=stale_scorecards(service, subs), new_links=new_links or [], notice=notice,
                  roster_text=roster_text, problem=problem)


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
        # The roster is refused whole: the text pasted stays in the form, to be corrected where it is wrong.
        return dashboard(service, request, who, form, status=400, roster_text=pasted,
                         problem=f"Roster not imported: {refused}")
    links = [(sid, service.link(token)) for sid, token in made if token]
    return dashboard(service, request, who, form, links, f"{len(made)} student(s) imported.")


def student_action(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert form is not None
    student_id = request.path_params["student"]
    if accounts.student(service.store, student_id) is None:
        raise Page(404, "No such student", "There is no student with that id.")
    action = request.path_params["action"]
    if action == "tier":
        accounts.set_tier(service.store, student_id, str(form.get("tier", "")))
        return dashboard(service, request, who, form, notice=f"{student_id} is now {form.get('tier')}.")
    if action == "link":
        accounts.revoke_links(service.store, student_id)
        token = accounts.new_link(service.store, "student", student_id)
        return dashboard(service, request, who, form, [(student_id, service.link(token))],
                         f"New sign-in link for {student_id}; the old one no longer works.")
    if action == "extension":
        return give_extension(service, request, who, form, student_id)
    if action == "revoke":
        count = accounts.revoke_links(service.store, student_id)
        return dashboard(service, request, who, form, notice=f"{count} link(s) of {student_id} revoked.")
    raise Page(404, "No such action", "Unknown action.")


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


def instructor_link(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """A new one-time sign-in link for another instructor (or this one on another device)."""
    token = accounts.new_link(service.store, "instructor")
    return dashboard(service, request, who, form, [("instructor", service.link(token))],
                     "A new instructor sign-in link: it works once.")


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
                  history=list(reversed(theirs)), late=late_ids(deadlines, theirs))


def regrade(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """GET: what a regrade of the exercise would grade again, and what the newest gradings changed. POST
    (the page's button): queue them all, then back to this page, which follows the regrade as it goes."""
    from grader.service.regrade import regrade_summary

    exercise = exercise_of(service, request.path_params["slug"])
    if form is None:
        done = request.query_params.get("queued")
        notice = ""
        if done is not None and (count := whole_number(done, 7)) is not None:
            notice = (f"{count} submission(s) queued for regrading; this page shows each changed score as its "
                      "grading ends (reload it).")
        return render("regrade.html.j2", who=who, exercise=exercise, notice=notice,
                      summary=regrade_summary(service.store, exercise.slug))
    ids = [s.id for s in service.store.submissions(exercise.slug)]
    queued = jobs.requeue(service.store, ids)
    for submission_id in queued:
        enqueue(service, submission_id)
    return RedirectResponse(f"/instructor/regrade/{exercise.slug}?queued={len(queued)}", status_code=303)


# The overviews of the other policies, beside that of the latest: under their own folder, so that the
# site's relative links keep the policy.
POLICY_FOLDERS = ("best", "on-time")


def site_file(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    from grader.deadlines import Deadlines
    from grader.publish import build_site

    name = request.path_params["name"]
    asked = request.query_params.get("policy")
    if asked in POLICY_FOLDERS and not name.startswith(f"{asked}/"):
        return RedirectResponse(f"/instructor/site/{asked}/{name}", status_code=303)
    folder, _, rest = name.partition("/")
    policy, name = (folder, rest) if folder in POLICY_FOLDERS else ("latest", name)
    files = build_site(service.store, policy, deadlines=Deadlines.of(service.exercises.values(), service.store))
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


STORE_AWAY = ("Back in a moment", "The service cannot reach its store right now (a restart or a network "
              "hiccup). Nothing you sent is lost and grading resumes by itself: try again in a minute.")
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


def create_app(service: Service) -> AccessLog:
    routes = [
        Route("/favicon.ico", favicon),
        route("/")(home),
        route("/signin/{token}")(signin),
        Route("/signin/{token}", signin_confirmed, methods=["POST"]),
        route("/signout", ("POST",), role="any")(signout),
        route("/history", role="student")(history),
        route("/exercises/{slug}", role="any")(exercise_view),
        route("/exercises/{slug}/prediction", ("POST",), role="student")(predict),
        route("/exercises/{slug}/submit", ("POST",), role="student")(submit),
        route("/exercises/{slug}/solution", role="any")(solution),
        route("/submissions/{id}", role="any")(submission_view),
        route("/submissions/{id}/report", role="any")(report),
        route("/instructor", role="instructor")(dashboard),
        route("/instructor/roster", ("POST",), role="instructor")(roster),
        route("/instructor/students/{student}", role="instructor")(student_history),
        route("/instructor/students/{student}/{action}", ("POST",), role="instructor")(student_action),
        route("/instructor/regrade/{slug}", ("GET", "POST"), role="instructor")(regrade),
        route("/instructor/link", ("POST",), role="instructor")(instructor_link),
        route("/instructor/site/{name:path}", role="instructor")(site_file),
        route("/instructor/similarity/{slug}", role="instructor")(similarity),
        route("/instructor/similarity/{slug}/{rank}", role="instructor")(similarity),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error, OperationalError: store_unavailable,
                                                         InterfaceError: store_unavailable, Exception: server_fault})
    app.state.service = service
    return AccessLog(Guard(app, service.max_request_bytes))
