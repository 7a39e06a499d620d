"""The LTI pages of `grader serve`: the tool's JWKS, the OIDC login, the launch (a student lands on the
exercise, an instructor on it or on the deep linking page), and the dashboard's actions (send pending
scores now, fill the roster from a course). `grader.lti.mount` hands them to the web application when the
`lti` extra is installed.

The platform posts the launch from its own site, so the login's state cookie is `SameSite=None; Secure`
(a browser sends no other kind back with a cross-site POST): LTI needs the service behind https
(`grader serve --base-url https://...`).
"""

from __future__ import annotations

import logging
import math
import re
import weakref
from urllib.parse import urlsplit

from jwt import PyJWK
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from grader.course.store import Store
from grader.errors import StoreError
from grader.lti import ags, nrps
from grader.lti.deep_link import content_item, full_points, response_jwt
from grader.lti.key_sets import key_sets_of
from grader.lti.keys import jwks
from grader.lti.launch import (
    DEEP_LINKING,
    LOGIN_SECONDS,
    STATE_COOKIE,
    Claimed,
    Launch,
    LaunchError,
    identify,
    login,
    signing_key,
    verify,
)
from grader.lti.roles import CourseRole
from grader.lti.services import ServiceError
from grader.lti.users import ensure_user, remember_context, renew_link
from grader.service import accounts
from grader.web.auth import COOKIE, route, set_cookie
from grader.web.base import Page, Service, message_page, render, text_field
from grader.web.form_fields import Field, checked_form
from grader.web.instructor import after, dashboard
from grader.web.lookup import deadlines_of, not_open_yet
from grader.web.rate import AddressRate, seconds_text

log = logging.getLogger("grader.lti")
STATE = re.compile(r"[A-Za-z0-9_-]{20,64}")
LOGIN_PARAMS = ("iss", "login_hint", "target_link_uri", "lti_message_hint", "client_id", "lti_deployment_id")
# What a platform sends, with room to spare (an id_token of a few KiB, a message hint that is a JWT itself).
LOGIN_FIELDS = [Field("iss", 2000), Field("login_hint", 2000), Field("target_link_uri", 2000),
                Field("lti_message_hint", 8000), Field("client_id", 255), Field("lti_deployment_id", 255)]
LAUNCH_FIELDS = [Field("id_token", 64 * 1024, label="id_token"), Field("state", 100)]


def redirect_uri(service: Service) -> str:
    return f"{service.base_url.rstrip('/')}/lti/launch"


async def jwks_endpoint(request: Request) -> Response:
    service: Service = request.app.state.service
    return JSONResponse(await run_in_threadpool(jwks, service.store))


# Logins and launches need no sign-in, and each costs something (a row; a wait on the platform's keys):
# per address, a class behind one NAT address launching at once fits, a script writing rows does not.
LOGINS_BURST, LOGIN_EVERY_S = 120, 1.0
_rates: weakref.WeakKeyDictionary[Store, dict[str, AddressRate]] = weakref.WeakKeyDictionary()


async def too_often(request: Request, what: str) -> Response | None:
    """The 429 page when this address began too many `what` ("logins", "launches") of late; None when it
    may go on."""
    service: Service = request.app.state.service
    rates = _rates.setdefault(service.store, {})
    rate = rates.setdefault(what, AddressRate(LOGINS_BURST, LOGIN_EVERY_S))
    wait = rate.wait_s(request.client.host if request.client else "")
    if not wait:
        return None
    page = await run_in_threadpool(message_page, None, 429, f"Too many {what}",
                                   f"This address began more than {LOGINS_BURST} {what} in the last minutes: "
                                   f"try again in {seconds_text(wait)}.")
    page.headers["retry-after"] = str(max(1, math.ceil(wait)))
    return page


async def login_endpoint(request: Request) -> Response:
    """Third-party initiated login, by GET or POST (platforms use either)."""
    service: Service = request.app.state.service
    if (refused := await too_often(request, "logins")) is not None:
        return refused
    try:
        checked_form(FormData(list(request.query_params.multi_items())), LOGIN_FIELDS)
    except Page as page:
        return await run_in_threadpool(message_page, None, page.status, page.title, page.message)
    params = {k: v for k, v in request.query_params.items() if k in LOGIN_PARAMS}
    if request.method == "POST":
        form = await request.form(max_files=0, max_fields=20)
        try:
            checked_form(form, LOGIN_FIELDS)
        except Page as page:
            return await run_in_threadpool(message_page, None, page.status, page.title, page.message)
        finally:
            await form.close()
        params.update({k: v for k, v in form.items() if k in LOGIN_PARAMS and isinstance(v, str)})
    try:
        started = await run_in_threadpool(login, service.store, params, redirect_uri(service))
    except LaunchError as exc:
        return await run_in_threadpool(message_page, None, exc.status, exc.title, exc.message)
    response = RedirectResponse(started.redirect, status_code=302)
    # SameSite=None (and so Secure): the platform posts the launch from its own site, and the browser
    # sends this cookie back with it only so.
    response.set_cookie(STATE_COOKIE + started.state, started.state, max_age=LOGIN_SECONDS, path="/lti",
                        httponly=True, secure=True, samesite="none")
    return response


async def launch_endpoint(request: Request) -> Response:
    service: Service = request.app.state.service
    form = await request.form(max_files=0, max_fields=20)
    try:
        checked_form(form, LAUNCH_FIELDS)
        id_token, state = text_field(form, "id_token"), text_field(form, "state")
    except Page as page:
        return await run_in_threadpool(message_page, None, page.status, page.title, page.message)
    finally:
        await form.close()
    if (refused := await too_often(request, "launches")) is not None:
        return refused
    cookie = request.cookies.get(STATE_COOKIE + state) if STATE.fullmatch(state) else None
    others = any(name.startswith(STATE_COOKIE) for name in request.cookies)
    try:
        claimed = await run_in_threadpool(identify, service.store, id_token, state, cookie, others)
        # On the event loop, in no thread: launches waiting on a slow key set hold none of the pages' threads.
        key = await signing_key(key_sets_of(service.store), claimed)
    except LaunchError as exc:
        return await run_in_threadpool(message_page, None, exc.status, exc.title, exc.message)
    return await run_in_threadpool(launched, service, request, id_token, state, claimed, key)


def launched(service: Service, request: Request, id_token: str, state: str, claimed: Claimed, key: PyJWK
             ) -> Response:
    try:
        launch = verify(service.store, id_token, state, claimed, key)
        response = landing(service, launch)
        session = signed_in(service, launch)
    except LaunchError as exc:
        return message_page(None, exc.status, exc.title, exc.message)
    except StoreError as exc:
        return message_page(None, 400, "Not possible", str(exc))
    accounts.sign_out(service.store, request.cookies.get(COOKIE))  # the LMS's user is who is here now
    set_cookie(service, response, COOKIE, session, max_age=accounts.SESSION_SECONDS)
    response.delete_cookie(STATE_COOKIE + state, path="/lti", httponly=True, secure=True, samesite="none")
    return response


# The account a course role signs in as (grader.lti.roles); a launch with no role in its course signs no one in.
ACCOUNT_ROLES = {CourseRole.INSTRUCTOR: "instructor", CourseRole.TEACHING_ASSISTANT: "ta", CourseRole.LEARNER: "student"}


def signed_in(service: Service, launch: Launch) -> str:
    """A session for the launch's user, as a student of the roster, a teaching assistant or an instructor,
    by their role in the launch's course."""
    role = ACCOUNT_ROLES.get(launch.course_role)
    if role is None:
        shown = ", ".join(r[:120] for r in launch.roles[:6]) or "none"
        raise LaunchError(403, "No role in this course", "This tool lets in the course's learners, instructors and "
                                                         "teaching assistants, by their role in the course the launch "
                                                         f"comes from; this launch gave none of them (its roles: {shown}). "
                                                         "Ask the course's instructor to enrol you.")
    user = ensure_user(service.store, launch.platform, launch.sub, role, launch.name, launch.email)
    remember_context(service.store, launch)
    session = accounts.open_session(service.store, user.link_id)
    if session is None and user.student_id:
        # Revoked: the launch signs in again only once the instructor made the student a new sign-in link.
        known = accounts.student(service.store, user.student_id)
        if known is not None and known.link_active:
            session = accounts.open_session(service.store, renew_link(service.store, user).link_id)
    if session is None:
        raise LaunchError(403, "Access revoked", "Your instructor revoked your access to this service: ask them "
                                                 "to restore it (a new sign-in link does).")
    return session


def landing(service: Service, launch: Launch) -> Response:
    """Where the launch takes the browser: the exercise its link names, or the deep linking page."""
    if launch.message_type == DEEP_LINKING:
        return deep_linking_page(service, launch)
    exercise = launch.exercise
    if exercise in service.exercises:
        # A student launched before the exercise opens is told when it does (its page would only say so too).
        why = not_open_yet(deadlines_of(service), launch.is_instructor, service.exercises[exercise], service.clock())
        if why:
            return message_page(None, 403, "Not open yet", why)
        return RedirectResponse(f"/exercises/{exercise}", status_code=303)
    return RedirectResponse("/instructor" if launch.is_instructor else "/", status_code=303)


def deep_linking_page(service: Service, launch: Launch) -> Response:
    if not launch.is_instructor:
        raise LaunchError(403, "For instructors", "Only an instructor of the course places exercises in it.")
    settings = launch.deep_linking
    return_url = str(settings.get("deep_link_return_url", ""))
    target = urlsplit(return_url)
    if target.scheme not in ("http", "https") or not target.netloc:
        raise LaunchError(400, "Deep linking without a return address",
                          "The platform's deep linking request has no deep_link_return_url to send the choice to.")
    accepted = settings.get("accept_types", ["ltiResourceLink"])
    if isinstance(accepted, list) and "ltiResourceLink" not in accepted:
        raise LaunchError(400, "Nothing to place here", "This place in the course does not take a resource link "
                                                        "(an exercise): add it as an assignment or a module item.")
    choices = []
    for exercise in service.exercises.values():
        points = full_points(exercise)
        item = content_item(exercise, service.base_url, points)
        choices.append({"slug": exercise.slug, "title": exercise.title, "points": points,
                        "jwt": response_jwt(service.store, launch, [item])})
    response = render("lti_deep_link.html.j2", who=None, choices=choices, return_url=return_url,
                      course=launch.context_title)
    # The page's buttons post to the platform, and it is shown in the platform's frame: the service's policy,
    # with those two origins allowed (a frame-ancestors directive makes browsers ignore X-Frame-Options).
    back = f"{target.scheme}://{target.netloc}"
    issuer = urlsplit(launch.platform.issuer)
    framing = {back, f"{issuer.scheme}://{issuer.netloc}"}
    response.headers["content-security-policy"] = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
        f"form-action 'self' {back}; frame-ancestors {' '.join(sorted(framing))}")
    return response


# -- the dashboard's actions --------------------------------------------------------------------------------

def retry(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    ags.retry_now(service.store)
    sent, failed = ags.deliver(service.store)
    notice = f"{sent} score(s) sent to the LMS." + (f" {failed} failed again: they are tried later by themselves."
                                                  if failed else "")
    return after(service, notice=notice)


def sync_roster(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert form is not None
    platform = text_field(form, "platform")
    course = nrps.course_of(service.store, int(platform), text_field(form, "context")) if platform.isdigit() else None
    if course is None:
        raise Page(404, "No such course", "No launch came from that course.")
    try:
        result = nrps.sync_roster(service.store, course)
    except ServiceError as exc:
        return dashboard(service, request, who, form, problem=f"The course's members could not be read: {exc}",
                         status=502)
    added = f": {', '.join(result.added)}" if result.added else ""
    return after(service, notice=f"{len(result.added)} learner(s) of {course.title or course.context_id} added to "
                                 f"the roster{added}; {result.known} on it already.")


def lti_routes() -> list[Route]:
    return [
        Route("/lti/jwks", jwks_endpoint, methods=["GET"]),
        Route("/lti/login", login_endpoint, methods=["GET", "POST"]),
        Route("/lti/launch", launch_endpoint, methods=["POST"]),
        route("/instructor/lti/retry", ("POST",), role="instructor")(retry),
        route("/instructor/lti/sync-roster", ("POST",), role="instructor",
              fields=[Field("platform", 20, required=True), Field("context", 255, required=True)])(sync_roster),
    ]
