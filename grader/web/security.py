"""What every response and request goes through: a size and a time cap on request bodies, and security
headers (the reports' Content-Security-Policy, with forms allowed to post to this server only)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("grader.web")

# The reports' policy: nothing fetched, no script; `form-action 'self'` lets the service's own forms post.
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'")
DRAIN_FACTOR = 8
# The time a whole request body may take to arrive: a form or a 1 MiB file takes a fraction of it on any
# link a student submits from; a client that sends part of a body and then nothing holds no memory past it.
BODY_TIMEOUT_S = 30.0
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


# What answers a body over the cap, given the request and the body's first bytes (never more than the cap):
# the application's own page. Without one, or when it fails, the answer is a line of text.
TooLargePage = Callable[[Scope, bytes], Awaitable[ASGIApp]]


class ClientGone(Exception):
    """The client went away before its body arrived whole."""


class Guard:
    """Refuses a body over `max_bytes` (413) whether it says its length or streams it, or one that has not
    arrived whole within `body_timeout_s` (408), and adds the security headers to every response. A 413 is
    `too_large_page`'s answer where there is one, made from the body's first `max_bytes` bytes at most:
    what is past them is read and dropped, or never read."""

    def __init__(self, app: ASGIApp, max_bytes: int, body_timeout_s: float = BODY_TIMEOUT_S,
                 too_large_page: TooLargePage | None = None) -> None:
        self.app, self.max_bytes, self.body_timeout_s = app, max_bytes, body_timeout_s
        self.too_large_page = too_large_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes * DRAIN_FACTOR):
            await self.too_large(scope, b"", send)  # not worth reading: the connection is closed behind the answer
            return
        # Read the whole body first (it is small by construction), so an oversize one is refused
        # before any of the application runs, however it was sent.
        try:
            body, whole = await self.read(receive, time.monotonic() + self.body_timeout_s)
        except asyncio.TimeoutError:
            await self.refuse(send, 408, f"Request body not received within {self.body_timeout_s:g} s.\n")
            return
        except ClientGone:
            return
        if not whole:
            await self.too_large(scope, body, send)
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def guarded_send(message: Message) -> None:
            await send(with_headers(message))

        await self.app(scope, replay, guarded_send)

    async def read(self, receive: Receive, deadline: float) -> tuple[bytes, bool]:
        """(the body, True), or (its first `max_bytes` bytes, False) when it is longer: then the rest is read
        and dropped (see `drain`). asyncio.TimeoutError when it has not arrived by `deadline`, ClientGone
        when the client went away."""
        kept: list[bytes] = []
        seen = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                kept.clear()  # what came so far is let go at once, not with the exception's frames
                raise
            if message["type"] != "http.request":
                raise ClientGone
            chunk = message.get("body", b"")
            if seen < self.max_bytes:
                kept.append(chunk[:self.max_bytes - seen])
            seen += len(chunk)
            more = message.get("more_body", False)
            if seen > self.max_bytes:
                if more:
                    await self.drain(receive, seen, deadline)
                return b"".join(kept), False
            if not more:
                return b"".join(kept), True

    async def drain(self, receive: Receive, seen: int, deadline: float) -> None:
        """Read and drop the rest of a somewhat oversize body, so the client, still sending, gets the
        413 instead of a reset connection; past DRAIN_FACTOR times the cap, or past the body's time, the
        connection is just closed after the answer."""
        while seen <= self.max_bytes * DRAIN_FACTOR:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                return
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def too_large(self, scope: Scope, prefix: bytes, send: Send) -> None:
        """The 413: the application's page made from the body's first bytes, else a line of text."""
        page = None
        if self.too_large_page is not None:
            try:
                page = await self.too_large_page(scope, prefix)
            except Exception:
                log.exception("the page of a request over the size cap could not be made")
        if page is None:
            await self.refuse(send)
            return

        async def nothing_more() -> Message:
            return {"type": "http.disconnect"}

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                # The client may still be sending what was not read: this answer ends the connection.
                message["headers"] = [*(h for h in message.get("headers", []) if h[0].lower() != b"connection"),
                                      (b"connection", b"close")]
            await send(with_headers(message))

        await page(scope, nothing_more, closing_send)

    async def refuse(self, send: Send, status: int = 413, text: str = "") -> None:
        body = (text or f"Request too large: at most {self.max_bytes // 1024} KiB.\n").encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close"),
                                (b"content-length", str(len(body)).encode()), *HEADERS]})
        await send({"type": "http.response.body", "body": body})


def with_headers(message: Message) -> Message:
    """A response's start with the security headers it does not set itself."""
    if message["type"] == "http.response.start":
        names = {name.lower() for name, _ in message.get("headers", [])}
        message["headers"] = [*message.get("headers", []), *[h for h in HEADERS if h[0] not in names]]
    return message
