"""What a connection may hold of `grader serve` before it has asked for anything.

uvicorn's `limit_concurrency` counts open connections as well as requests, and its h11 protocol gives a
connection no time limit until its first response: 100 connections that send nothing (or a header line
now and then) made every other request answer 503 for as long as they stayed open. Here instead:

- a connection whose request headers have not arrived whole within HEADER_TIMEOUT_S (after it opened, or
  after its last response) is closed: an idle or slow-header client holds nothing past that;
- one address may hold at most PENDING_PER_ADDRESS connections that wait for their headers; a further one
  from it is closed at once, so one machine cannot fill the server with them. A connection whose request
  is under way no longer counts, and a trusted proxy (trusted_proxies(): 127.0.0.1 unless said otherwise,
  whose idle connections wait between requests) has no such limit: it limits its own clients;
- at most MAX_CONNECTIONS connections in all (past it, new ones are closed at once), and at most
  MAX_REQUESTS requests under way at once, MAX_UPLOADS of them with a large body (past either, 503): what
  stalled uploads hold stays bounded (the Guard gives each body its time), and they never take the place
  of a page.

An idle connection costs the event loop a file descriptor and a few KiB; it never takes a request's place.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
from collections.abc import Awaitable, Callable
from typing import Any

import h11
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("grader.web")

HEADER_TIMEOUT_S = 10.0  # a browser sends its whole request head in one packet; a proxy likewise
PENDING_PER_ADDRESS = 64  # a lab behind one NAT address opens a few per browser, closed after 5 s idle
MAX_CONNECTIONS = 4000
MAX_REQUESTS = 200
MAX_UPLOADS = 32  # requests under way whose body may be over SMALL_BODY: each may hold up to the body cap
SMALL_BODY = 64 * 1024  # a form, a launch's id_token


def trusted_proxies() -> tuple[str, ...]:
    """The proxies whose X-Forwarded-For uvicorn believes (its `forwarded_allow_ips`: FORWARDED_ALLOW_IPS, by
    default 127.0.0.1, a proxy on this machine). A proxy keeps idle connections to the service between
    requests and limits its own clients per address, so it has no per-address limit here ("*": none has)."""
    return tuple(part.strip() for part in os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1").split(",") if part.strip())

BUSY = b"The service is busy: try again in a moment.\n"


class ConnectionBook:
    """The connections open and, per address, those waiting for their request headers (one event loop's)."""

    def __init__(self, pending_per_address: int = PENDING_PER_ADDRESS, max_connections: int = MAX_CONNECTIONS,
                 proxies: tuple[str, ...] | None = None) -> None:
        self.pending_per_address, self.max_connections = pending_per_address, max_connections
        self.proxies = trusted_proxies() if proxies is None else proxies
        self.pending: dict[str, int] = {}
        self.open = 0
        self.refused = 0

    def admit(self, address: str) -> bool:
        proxy = address in self.proxies or "*" in self.proxies
        if self.open >= self.max_connections or (not proxy and self.pending.get(address, 0) >= self.pending_per_address):
            self.refused += 1
            if self.refused in (1, 100) or self.refused % 10_000 == 0:
                log.warning("connection refused (%s): %d refused so far", address, self.refused)
            return False
        self.open += 1
        return True

    def wait(self, address: str) -> None:
        self.pending[address] = self.pending.get(address, 0) + 1

    def served(self, address: str) -> None:
        left = self.pending.get(address, 0) - 1
        if left > 0:
            self.pending[address] = left
        else:
            self.pending.pop(address, None)

    def closed(self) -> None:
        self.open -= 1


def guarded_protocol(book: ConnectionBook, header_timeout_s: float = HEADER_TIMEOUT_S) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the header time limit and the book's limits (pass it as `http=`)."""

    class Guarded(H11Protocol):
        admitted = False
        waiting = False
        header_timer: asyncio.TimerHandle | None = None

        @property
        def address(self) -> str:
            return self.client[0] if self.client else ""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if not book.admit(self.address):
                transport.abort()  # connection_lost follows, with nothing of ours to undo
                return
            self.admitted = True
            self.start_waiting()

        def start_waiting(self) -> None:
            if not self.waiting:
                self.waiting = True
                book.wait(self.address)
            if self.header_timer is not None:
                self.header_timer.cancel()
            self.header_timer = self.loop.call_later(header_timeout_s, self.headers_too_slow)

        def stop_waiting(self) -> None:
            if self.waiting:
                self.waiting = False
                book.served(self.address)
            if self.header_timer is not None:
                self.header_timer.cancel()
                self.header_timer = None

        def headers_too_slow(self) -> None:
            self.header_timer = None
            if self.waiting and not self.transport.is_closing():
                self.transport.close()

        def handle_events(self) -> None:
            super().handle_events()
            # h11 leaves IDLE once a request's head is read whole: from then on the Guard times its body.
            if self.waiting and self.conn.their_state is not h11.IDLE:
                self.stop_waiting()

        def on_response_complete(self) -> None:
            if self.admitted and not self.transport.is_closing():
                self.start_waiting()  # before the next pipelined request, which stops it again
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.admitted:
                self.stop_waiting()
                book.closed()
                self.admitted = False
            super().connection_lost(exc)

    return Guarded


def large_body(scope: Scope) -> bool:
    """Whether a request may bring a body over SMALL_BODY: one that says so, or says no length at all."""
    if scope["method"] in ("GET", "HEAD", "OPTIONS"):
        return False
    declared = dict(scope.get("headers", [])).get(b"content-length")
    return declared is None or not declared.isdigit() or int(declared) > SMALL_BODY


class RequestLimit:
    """At most `limit` requests under way at once, `uploads` of them with a large body (what holds memory:
    the Guard reads a body whole, up to the cap); past either, 503 before the request's body is read."""

    def __init__(self, app: Callable[[Any, Any, Any], Awaitable[None]], limit: int = MAX_REQUESTS,
                 uploads: int = MAX_UPLOADS) -> None:
        self.app, self.limit, self.uploads = app, limit, uploads
        self.running = self.uploading = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        large = large_body(scope)
        if self.running >= self.limit or (large and self.uploading >= self.uploads):
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", b"5"),
                                    (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": BUSY})
            return
        self.running += 1
        self.uploading += large
        try:
            await self.app(scope, receive, send)
        finally:
            self.running -= 1
            self.uploading -= large


def raise_file_limit(wanted: int = MAX_CONNECTIONS + 1000) -> None:
    """Let this process open as many files as its connections need (up to its hard limit): a soft limit of
    1024 would refuse connections, and open no store file, long before MAX_CONNECTIONS."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def server_options(book: ConnectionBook) -> dict[str, Any]:
    """uvicorn.Config's keywords for these limits."""
    return {"http": guarded_protocol(book), "limit_concurrency": None, "timeout_keep_alive": 5}
