"""Who is asking: the sessions and their cookies, the sign-in link's pages, signing out, and `route`,
which every handler goes through (the session read, the role checked, a POST's CSRF token checked).

Every form carries the session's CSRF token (the sign-in form, before any session, a token its page set
as a cookie); the cookies are HttpOnly, SameSite and, behind an https address, Secure.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Callable, Sequence
from typing import Literal

from sqlalchemy.exc import InterfaceError, OperationalError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from grader.errors import StoreError
from grader.service import accounts
from grader.web.base import Page, Service, message_page, render, text_field
from grader.web.form_fields import Field, checked_form
from grader.web.outage import not_received

COOKIE = "grader_session"
# The sign-in form's CSRF token, set by the link's page: there is no session (and no session token) yet.
SIGNIN_COOKIE = "grader_csrf"
TOKEN = re.compile(r"[A-Za-z0-9_-]{20,64}")  # what secrets.token_urlsafe makes


def set_cookie(service: Service, response: Response, name: str, value: str, *, path: str = "/",
               max_age: int | None = None, samesite: Literal["lax", "strict"] = "lax") -> None:
    """Every cookie of the service: never readable by a script, and Secure behind an https address."""
    response.set_cookie(name, value, max_age=max_age, path=path, httponly=True, secure=service.secure,
                        samesite=samesite)


def delete_cookie(service: Service, response: Response, name: str, path: str = "/") -> None:
    response.delete_cookie(name, path=path, httponly=True, secure=service.secure)


# Every handler runs in a thread (the store is synchronous), with the session.
Handler = Callable[[Service, Request, accounts.Session | None, FormData | None], Response]
#: A right a route asks beyond its role (a course's setting): raises `Page` (403) for whom it refuses.
Rights = Callable[[Service, accounts.Session | None], None]


def route(path: str, methods: tuple[str, ...] = ("GET",), role: str | None = None,
          signin_form: bool = False, outage: bool = False, fields: Sequence[Field] = (),
          rights: Rights | None = None) -> Callable[[Handler], Route]:
    """A route whose handler gets the session (None when signed out); `role` restricts it (instructor,
    staff: an instructor or a teaching assistant, student, or any signed-in person); POSTs
    need the session's CSRF token, or with `signin_form` the sign-in page's (there is no session yet),
    and their fields within their limits (`fields`: the form's own, grader.web.form_fields). `rights`
    asks what the role alone does not say (a course's setting); rights are asked before a form is read,
    so whom a route refuses learns nothing of its fields.
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
                    return not_received(request, form)
            else:
                service.sessions.remember(token, who)
            try:
                if role and (who is None or (role == "instructor" and not who.is_instructor)
                             or (role == "staff" and not who.is_staff)
                             or (role == "student" and who.student is None)):
                    raise Page(403 if who else 401, "Not for you",
                               "Sign in with your personal link to see this page." if who is None
                               else "This page is not part of your account.")
                if rights is not None:
                    rights(service, who)
                if form is not None and not form_token_ok(request, who, form, signin_form):
                    raise Page(403, "Form expired", "This form is out of date or did not come from this site. "
                                                     "Go back, reload the page and try again.")
                if form is not None:
                    checked_form(form, fields)
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
