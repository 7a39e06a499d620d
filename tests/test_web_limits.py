"""What a crowd of slow or stalled uploads can hold of `grader serve`: a body must arrive whole in time,
and the server takes a bounded number of requests at once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
import socket
import time

import pytest

from grader.web.security import Guard
from tests.helpers import wait_until
from tests.service import Server, import_roster, signed_in


async def _stalled_upload(guard: Guard) -> list[dict]:
    sent: list[dict] = []
    chunks = [{"type": "http.request", "body": b"x" * 1000, "more_body": True}]

    async def receive() -> dict:
        if chunks:
            return chunks.pop()
        await asyncio.sleep(3600)  # the client sends nothing more and keeps the connection
        raise AssertionError("unreachable")

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [(b"content-length", b"100000")]}
    await guard(scope, receive, send)
    return sent


@pytest.mark.unit
def test_a_body_that_stops_arriving_is_refused_when_its_time_is_up():
    async def never_called(scope, receive, send):
        raise AssertionError("the application ran on a body that never came whole")

    started = time.monotonic()
    # A loop of its own in a thread of its own: a browser test's Playwright may hold this thread's loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        sent = pool.submit(asyncio.run, _stalled_upload(Guard(never_called, 1 << 20, body_timeout_s=0.3))).result()
    assert 0.3 <= time.monotonic() - started < 5
    assert sent[0]["status"] == 408 and b"not received within 0.3 s" in sent[1]["body"]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


@pytest.mark.slow
def test_many_stalled_uploads_hold_little_memory_and_the_service_answers_after(tmp_path):
    """1,500 clients each send 1000 KiB of a declared 1 MiB, then nothing: serve's memory stays under 200 MiB,
    the stalled ones are let go, and the service answers."""
    server = Server.start(tmp_path / "serve.log", "--db", str(tmp_path / "class.db"), "--sandbox", "local")
    host, port = server.url.removeprefix("http://").split(":")
    sockets: list[socket.socket] = []
    peak = 0.0
    try:
        body = b"x" * (1000 * 1024)
        head = (f"POST /instructor/roster HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded"
                f"\r\nContent-Length: {1 << 20}\r\n\r\n").encode()
        for _ in range(1500):
            client = socket.create_connection((host, int(port)))
            client.setblocking(False)
            try:
                client.send(head)
                client.send(body)
            except (BlockingIOError, ConnectionError):
                pass  # refused, or its buffers are full: either way it holds what the server took
            sockets.append(client)
            if len(sockets) % 100 == 0:
                peak = max(peak, rss_mib(server.process.pid))
        for _ in range(20):
            peak = max(peak, rss_mib(server.process.pid))
            time.sleep(0.1)
        print(f"\nserve's peak with 1,500 stalled uploads: {peak:.0f} MiB")
        assert peak < 200, f"serve grew to {peak:.0f} MiB with 1,500 stalled uploads"
        # Signed out, the home page is the sign-in prompt (401): the service's own answer, not a timeout.
        wait_until(lambda: server.client().get("/").status_code == 401, 90, "the service answering again")
        wait_until(lambda: all(_answered(client) for client in sockets), 90, "every stalled upload let go")
    finally:
        for client in sockets:
            client.close()
        server.stop()


def _answered(client: socket.socket) -> bool:
    """Whether the server has let this connection go: an answer (408, 503), an end or a reset."""
    try:
        client.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return False  # nothing yet: the server still waits on its body
    except OSError:
        pass
    return True


def _oversize(guard: Guard, declared: int, chunks: list[bytes]) -> tuple[list[dict], int]:
    """Sends `chunks` (declaring `declared` bytes) through `guard`: (what was sent back, how many chunks
    the client still had)."""
    sent: list[dict] = []
    waiting = list(reversed(chunks))

    async def receive() -> dict:
        chunk = waiting.pop()
        return {"type": "http.request", "body": chunk, "more_body": bool(waiting)}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/exercises/x/submit",
             "headers": [(b"content-length", str(declared).encode())]}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a loop of its own, as above
        pool.submit(asyncio.run, guard(scope, receive, send)).result()
    return sent, len(waiting)


@pytest.mark.unit
def test_a_body_over_the_cap_gets_the_applications_page_made_from_no_more_than_the_cap():
    from starlette.responses import HTMLResponse

    given: list[bytes] = []

    async def never_called(scope, receive, send):
        raise AssertionError("the application ran on a body over the cap")

    async def page(scope, prefix):
        given.append(prefix)
        return HTMLResponse("<p>too large</p>", status_code=413)

    async def broken(scope, prefix):
        raise RuntimeError("a page that failed")

    guard = Guard(never_called, 64 * 1024, too_large_page=page)
    body = bytes(range(256)) * 1000  # 250 KB in chunks of 40 KB, as a server hands them on
    chunks = [body[i:i + 40_000] for i in range(0, len(body), 40_000)]
    sent, left = _oversize(guard, len(body), chunks)
    assert given == [body[:64 * 1024]] and left == 0  # the rest was read and dropped, never kept
    headers = dict(sent[0]["headers"])
    assert sent[0]["status"] == 413 and headers[b"connection"] == b"close"
    assert headers[b"content-type"].startswith(b"text/html") and b"content-security-policy" in headers
    assert sent[1]["body"] == b"<p>too large</p>"
    sent, left = _oversize(guard, 64 * 1024 * 9, chunks)  # past what is worth reading: nothing is read
    assert given[1:] == [b""] and left == len(chunks) and sent[0]["status"] == 413
    sent, _ = _oversize(Guard(never_called, 64 * 1024, too_large_page=broken), len(body), chunks)
    assert sent[0]["status"] == 413 and b"at most 64 KiB" in sent[1]["body"]  # a line of text, then


ATTACKER = "127.0.0.2"  # another loopback address: the student's own connections come from 127.0.0.1


def _open_idle_and_slow_header_connections(host: str, port: int, idle: int, slow: int) -> list[socket.socket]:
    """`idle` connections that send nothing and `slow` ones that send a request line and then nothing more,
    all from ATTACKER; each connection the server closed or refused at once is kept too (it is closed)."""
    opened: list[socket.socket] = []
    for number in range(idle + slow):
        client = socket.socket()
        client.bind((ATTACKER, 0))
        client.setblocking(False)
        client.connect_ex((host, port))
        if number >= idle:
            with contextlib.suppress(OSError):
                time.sleep(0.001)
                client.send(f"GET / HTTP/1.1\r\nHost: {host}\r\n".encode())
        opened.append(client)
    return opened


def _time_page(client, path: str) -> tuple[float, int]:
    """(seconds, status) of a page; status 0 when no answer came within the client's timeout."""
    import httpx

    started = time.monotonic()
    try:
        status = client.get(path).status_code
    except httpx.TimeoutException:
        status = 0
    return time.monotonic() - started, status


@pytest.mark.slow
def test_a_student_is_answered_within_a_second_beside_500_idle_and_slow_header_connections(tmp_path):
    """One address opens 250 connections that send nothing and 250 that send a header line every 3 s: a
    signed-in student's page still answers 200 within a second each time, and the service drops the
    lingering ones once their time for a request head is past."""
    server = Server.start(tmp_path / "serve.log", "--db", str(tmp_path / "class.db"), "--sandbox", "local")
    host, port = server.url.removeprefix("http://").split(":")
    attackers: list[socket.socket] = []
    try:
        instructor, csrf = signed_in(server, server.instructor_link)
        student, _ = signed_in(server, import_roster(server, instructor, csrf, "id\nana\n")["ana"])
        student.get("/")  # one connection open already, as a browser's
        attackers = _open_idle_and_slow_header_connections(host, int(port), 250, 250)
        times: list[tuple[float, int]] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for client in attackers[250:]:  # a header line now and then: never a whole request head
                with contextlib.suppress(OSError):
                    client.send(b"X-Slow: 1\r\n")
            fresh = server.client()  # a new connection each time too, as another student's browser
            fresh.cookies = student.cookies
            times += [_time_page(student, "/"), _time_page(fresh, "/")]
            time.sleep(3)
        print(f"\nstudent's page beside 500 idle and slow-header connections: {len(times)} requests, "
              f"slowest {max(t for t, _ in times):.3f} s, statuses {sorted({s for _, s in times})}")
        assert all(status == 200 for _, status in times), times
        assert max(t for t, _ in times) < 1.0, times
        still_open = sum(not _answered(client) for client in attackers)
        print(f"attacker's connections still open after 15 s: {still_open} of {len(attackers)}")
        assert still_open == 0
    finally:
        for client in attackers:
            client.close()
        server.stop()


@pytest.mark.slow
def test_a_student_is_answered_within_a_second_beside_60_launches_waiting_on_a_slow_key_set(tmp_path):
    """The platform's key set answers after 12 s; 60 launches with made-up key ids from one login arrive at
    once: a signed-in student's page still answers within a second each time, and the launches get the page
    that says the platform's keys are too slow, each waiting for the one fetch under way."""
    import concurrent.futures

    import httpx

    from grader.cli import main
    from tests.lti_platform import CLIENT_ID, DEPLOYMENT, TestPlatform

    platform = TestPlatform().start()
    platform.jwks_delay_s = 12
    db = tmp_path / "class.db"
    registration = platform.registration
    assert main(["lti", "add-platform", "--db", str(db), "--issuer", registration["issuer"], "--client-id", CLIENT_ID,
                 "--deployment", DEPLOYMENT, "--auth-login-url", registration["auth_login_url"],
                 "--auth-token-url", registration["auth_token_url"], "--keyset-url", registration["keyset_url"],
                 "--tier", "premium"]) == 0
    server = Server.start(tmp_path / "serve.log", "--db", str(db), "--sandbox", "local")
    try:
        instructor, csrf = signed_in(server, server.instructor_link)
        student, _ = signed_in(server, import_roster(server, instructor, csrf, "id\nana\n")["ana"])
        started = server.client().get("/lti/login", params={"iss": platform.issuer, "login_hint": "x",
                                                             "client_id": CLIENT_ID}, follow_redirects=False)
        assert started.status_code == 302, started.text[:300]
        query = dict(httpx.URL(started.headers["location"]).params)
        state, nonce = query["state"], query["nonce"]

        tokens = [platform.id_token(nonce, kid=f"made-up-{number}") for number in range(60)]
        launcher = httpx.Client(timeout=90, limits=httpx.Limits(max_connections=100))
        server.clients.append(launcher)

        def launch(number: int) -> tuple[int, float, str]:
            began = time.monotonic()
            answer = launcher.post(f"{server.url}/lti/launch", data={"id_token": tokens[number], "state": state},
                                   headers={"cookie": f"grader_lti_state_{state}={state}"})
            title = re.search(r"<h1>(.*?)</h1>", answer.text)
            return answer.status_code, time.monotonic() - began, title.group(1) if title else ""

        times: list[tuple[float, int]] = []
        with concurrent.futures.ThreadPoolExecutor(60) as pool:
            launches = [pool.submit(launch, number) for number in range(60)]
            time.sleep(0.5)
            while not all(f.done() for f in launches):
                times.append(_time_page(student, "/"))
                time.sleep(0.5)
            answers = [f.result() for f in launches]
        print(f"\nstudent's page beside 60 launches waiting on a key set that takes 12 s: {len(times)} requests, "
              f"slowest {max(t for t, _ in times):.3f} s, statuses {sorted({s for _, s in times})}")
        print(f"launches: statuses {sorted({s for s, _, _ in answers})}, titles {sorted({t for _, _, t in answers})}, "
              f"slowest {max(t for _, t, _ in answers):.1f} s; key set fetched {platform.jwks_requests} time(s), "
              f"{platform.jwks_most_at_once} at once at most")
        assert times and all(status == 200 for _, status in times), times
        assert max(t for t, _ in times) < 1.0, times
        assert {(status, title) for status, _, title in answers} == {(502, "Platform keys too slow")}
        # One fetch at a time (another only once the failure's FAILURE_KEEP_S is past), never one per launch.
        assert platform.jwks_most_at_once == 1 and platform.jwks_requests <= 3
    finally:
        server.stop()
        platform.stop()


@pytest.mark.unit
def test_the_connection_book_limits_waiting_connections_per_address_but_not_the_proxys():
    from grader.web.connections import ConnectionBook

    book = ConnectionBook(pending_per_address=3, max_connections=10, proxies=("127.0.0.1",))
    for _ in range(3):
        assert book.admit("198.51.100.7")
        book.wait("198.51.100.7")
    assert not book.admit("198.51.100.7")  # a fourth waiting one from that address
    assert book.admit("203.0.113.9")  # another address is not held up by it
    book.wait("203.0.113.9")
    book.served("198.51.100.7")  # one of them sent its request head: a new one may come
    assert book.admit("198.51.100.7")
    book.wait("198.51.100.7")
    for _ in range(5):  # the proxy on this machine: no limit per address, only the total
        assert book.admit("127.0.0.1")
        book.wait("127.0.0.1")
    assert book.open == 10 and not book.admit("127.0.0.1") and not book.admit("192.0.2.1")
    book.closed()
    assert book.admit("192.0.2.1")
