"""The browser of the tests of reports and pages: the system's Chromium, driven with Playwright.

`chromium_browser` starts one headless Chromium for the whole run; `new_page(width, height, mobile)` opens
a page in a fresh context (its own cookies, viewport and device), closed after the test, and `page` is
one at desktop width. `problems(page)` and `requests(page)` say what a page logged as an error or
warning and what it fetched. No browser is downloaded: Playwright launches /usr/bin/chromium (or the
first Chromium on PATH); without one the tests skip, except under CI=true, where that fails.

`Browser` below is the older hand-written DevTools driver: only tests/test_publish.py still uses it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

try:
    from playwright.sync_api import Page, expect
except ImportError:  # `chromium_browser` says so: the browser tests skip, or fail under CI=true
    Page, expect = Any, None  # type: ignore[assignment,misc]

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Root in a container: Chromium's own sandbox needs namespaces it is not given (--no-sandbox); /dev/shm is
# often 64 MiB there (--disable-dev-shm-usage); no GPU; no QUIC, so nothing but the page's own requests.
LAUNCH_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--disable-quic"]
DESKTOP = (1280, 900)


def find_chromium() -> str | None:
    if os.path.isfile("/usr/bin/chromium"):
        return "/usr/bin/chromium"
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


@dataclass
class Watch:
    """What a page did: console errors and warnings, uncaught exceptions, failed loads; the URLs requested."""
    problems: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


_WATCHES: weakref.WeakKeyDictionary[Any, Watch] = weakref.WeakKeyDictionary()


def watch(page: Any) -> Watch:
    found = _WATCHES.get(page)
    if found is None:
        found = _WATCHES[page] = Watch()
        page.on("console", lambda m: m.type in ("error", "warning", "assert")
                and found.problems.append(f"console.{m.type}: {m.text} {m.location.get('url', '')}"))
        page.on("pageerror", lambda exc: found.problems.append(f"exception: {exc}"))
        page.on("requestfailed", lambda r: found.problems.append(f"request failed: {r.url} {r.failure}"))
        page.on("request", lambda r: found.requests.append(r.url))
    return found


def problems(page: Any) -> list[str]:
    return list(watch(page).problems)


def requests(page: Any) -> list[str]:
    return list(watch(page).requests)


@pytest.fixture(scope="session")
def chromium_browser(chromium: str) -> Iterator[Any]:
    """One headless Chromium for the whole run (it takes a second to start)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - pip install -e '.[test]' brings it
        message = "Playwright is not installed (pip install -e '.[test]')"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def new_page(chromium_browser: Any) -> Iterator[Callable[..., Any]]:
    """Opens a page in a fresh context (`width` x `height`, a phone's when `mobile`), watched from its
    first request; every context is closed after the test."""
    contexts = []

    def open_page(width: int = DESKTOP[0], height: int = DESKTOP[1], mobile: bool = False) -> Any:
        context = chromium_browser.new_context(viewport={"width": width, "height": height}, is_mobile=mobile,
                                               device_scale_factor=1)
        context.set_default_timeout(30_000)
        contexts.append(context)
        page = context.new_page()
        watch(page)
        return page

    try:
        yield open_page
    finally:
        for context in contexts:
            context.close()


@pytest.fixture
def page(new_page: Callable[..., Any]) -> Any:
    """A page at desktop width in a context of its own."""
    return new_page()


def screenshot(page: Any, path: Path) -> Path:
    """The whole page, not just the viewport."""
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


class Browser:
    """Headless Chromium with one page, spoken to over the DevTools pipe."""

    def __init__(self, executable: str, profile: str, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.buffer = b""
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def plumb() -> None:  # in the child: the pipe ends become fds 3 and 4
            high_in, high_out = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
                 "--no-default-browser-check", "--remote-debugging-pipe", f"--user-data-dir={profile}",
                 "about:blank"]
        self.process = subprocess.Popen([executable, *flags], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, preexec_fn=plumb, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)

    # -- the protocol -----------------------------------------------------------------------------

    def send(self, method: str, session: bool = False, **params: Any) -> int:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.next_id

    def receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise TimeoutError("Chromium did not answer in time")
            import select

            ready, _, _ = select.select([self.from_browser], [], [], 0.2)
            if ready:
                chunk = os.read(self.from_browser, 1 << 20)
                if not chunk:
                    raise ConnectionError("Chromium closed the DevTools pipe")
                self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        wanted = self.send(method, session, **params)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self.receive(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, event: str, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.timeout)
        for index, message in enumerate(self.events):
            if message.get("method") == event:
                return self.events.pop(index)
        while True:
            message = self.receive(deadline)
            if message.get("method") == event:
                return message
            if "method" in message:
                self.events.append(message)

    # -- page helpers ---------------------------------------------------------------------------------

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        return self.call(method, session=True, **params)

    def evaluate(self, expression: str) -> Any:
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def viewport(self, width: int, height: int, mobile: bool = False) -> None:
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=mobile)

    def open(self, url: str) -> None:
        self.page("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def screenshot(self, path: Path) -> Path:
        """The whole page, not just the viewport."""
        height = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)"))
        width = int(self.evaluate("window.innerWidth"))
        shot = self.page("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": width, "height": min(height, 16_000), "scale": 1})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and browser log errors seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        return found

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        try:
            self.send("Browser.close")
            self.process.wait(timeout=5)
        except Exception:
            pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=5)
        os.close(self.to_browser)
        os.close(self.from_browser)
