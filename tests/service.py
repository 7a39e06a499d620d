"""Helpers for the tests of the web service: a real `grader serve` (uvicorn on loopback) in a child
process, and a signed-in httpx client."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

PROJECT = Path(__file__).resolve().parent.parent
SIGNIN = re.compile(r"instructor sign-in \(works once\): (http://\S+)")
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
STATE = re.compile(r'data-state="(\w+)"')


def grader_command(*args: str) -> list[str]:
    """`grader ...` from this checkout (the installed script may point at another one)."""
    return [sys.executable, "-c", "import sys; from grader.__main__ import run; sys.exit(run())", *args]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PROJECT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@dataclass
class Server:
    process: subprocess.Popen
    url: str
    instructor_link: str
    log: Path
    clients: list[httpx.Client] = field(default_factory=list)

    @classmethod
    def start(cls, log: Path, *args: str, cwd: Path = PROJECT, wait_s: float = 60) -> Server:
        with log.open("w") as out:  # the server writes to its own copy; this process reads the file by name
            process = subprocess.Popen(grader_command("serve", "--host", "127.0.0.1", "--port", "0", *args),
                                       cwd=cwd, env=child_env(), stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            found = SIGNIN.search(log.read_text())
            if found:
                link = found.group(1)
                return cls(process, link.split("/signin/")[0], link, log)
            if process.poll() is not None:
                break
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # with whatever it started
        process.wait()
        raise RuntimeError(f"grader serve did not start:\n{log.read_text()}")

    def client(self) -> httpx.Client:
        client = httpx.Client(base_url=self.url, follow_redirects=True, timeout=30)
        self.clients.append(client)
        return client

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@contextlib.contextmanager
def local_server(folder: Path, *args: str, cwd: Path = PROJECT) -> Iterator[Server]:
    """`grader serve` on the local sandbox with its store in `folder`, stopped afterwards."""
    server = Server.start(folder / "serve.log", "--db", str(folder / "class.db"), "--sandbox", "local", *args,
                          cwd=cwd)
    try:
        yield server
    finally:
        server.stop()


def csrf_of(page: httpx.Response) -> str:
    found = CSRF.search(page.text)
    assert found, f"no CSRF token on {page.url}"
    return found.group(1)


# The sign-in page's form and its token (the header's sign-out form, when signed in, holds the session's).
SIGNIN_FORM = re.compile(r'<form method="post" action="(/signin/[^"]+)"><input type="hidden" name="csrf" '
                         r'value="([^"]+)">')


def press_sign_in(client: httpx.Client, link: str, **fields: str) -> httpx.Response:
    """Open a sign-in link and press its button, as a person does; the button's answer, not followed.
    Works with an httpx client and with Starlette's TestClient alike."""
    page = client.get(link, follow_redirects=False)
    form = SIGNIN_FORM.search(page.text)
    assert page.status_code == 200 and form, (page.status_code, page.text[:500])
    return client.post(form.group(1), data={"csrf": form.group(2), **fields}, follow_redirects=False)


def signed_in(server: Server, link: str) -> tuple[httpx.Client, str]:
    """A client signed in with `link`, and its session's CSRF token."""
    client = server.client()
    pressed = press_sign_in(client, link)
    assert pressed.status_code == 303, pressed.text
    page = client.get(pressed.headers["location"])
    assert page.status_code == 200, page.text
    return client, csrf_of(page)


def import_roster(server: Server, instructor: httpx.Client, csrf: str, csv: str) -> dict[str, str]:
    """Import a roster on the dashboard; the sign-in link of each new student."""
    page = instructor.post("/instructor/roster", data={"csrf": csrf, "csv": csv})
    assert page.status_code == 200, page.text
    return dict(re.findall(r"<tr><td>([^<]+)</td><td class=\"link\">(http://[^<]+)</td></tr>", page.text))


def wait_graded(client: httpx.Client, status_url: str, wait_s: float = 240) -> httpx.Response:
    """Follow a submission's status page until it is graded; the states seen on the way are kept."""
    seen: list[str] = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        page = client.get(status_url)
        state = STATE.findall(page.text)
        if state and (not seen or seen[-1] != state[0]):
            seen.append(state[0])
        if state == ["graded"]:
            page.extensions["states"] = seen
            return page
        time.sleep(0.3)
    raise AssertionError(f"{status_url} not graded in {wait_s} s; states seen: {seen}")
