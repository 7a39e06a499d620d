"""What every response and request goes through: a size and a time cap on request bodies, and security
headers (the reports' Content-Security-Policy, with forms allowed to post to this server only)."""

from __future__ import annotations

import asyncio
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


class Guard:
    """Refuses a body over `max_bytes` (413) whether it says its length or streams it, or one that has not
    arrived whole within `body_timeout_s` (408), and adds the security headers to every response."""

    def __init__(self, app: ASGIApp, max_bytes: int, body_timeout_s: float = BODY_TIMEOUT_S) -> None:
        self.app, self.max_bytes, self.body_timeout_s = app, max_bytes, body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            if declared.isdigit() and int(declared) <= self.max_bytes * DRAIN_FACTOR:
                await self.drain(receive)
            await self.refuse(send)
            return
        # Read the whole body first (it is small by construction), so an oversize one is refused
        # before any of the application runs, however it was sent.
        chunks: list[bytes] = []
        seen = 0
        more = True
        deadline = time.monotonic() + self.body_timeout_s
        while more:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                chunks.clear()  # what came so far is let go at once
                await self.refuse(send, 408, f"Request body not received within {self.body_timeout_s:g} s.\n")
                return
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                if message.get("more_body", False):
                    await self.drain(receive, seen)
                await self.refuse(send)
                return
            more = message.get("more_body", False)
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *[h for h in HEADERS if h[0] not in names]]
            await send(message)

        await self.app(scope, replay, guarded_send)

    async def drain(self, receive: Receive, seen: int = 0) -> None:
        """Read and drop the rest of a somewhat oversize body, so the client, still sending, gets the
        413 instead of a reset connection; past DRAIN_FACTOR times the cap the connection is just closed."""
        while seen <= self.max_bytes * DRAIN_FACTOR:
            message = await receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def refuse(self, send: Send, status: int = 413, text: str = "") -> None:
        body = (text or f"Request too large: at most {self.max_bytes // 1024} KiB.\n").encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close"),
                                (b"content-length", str(len(body)).encode()), *HEADERS]})
        await send({"type": "http.response.body", "body": body})
