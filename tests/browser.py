"""The browser of the tests of reports and pages: the system's Chromium, driven with Playwright.

`chromium_browser` starts one headless Chromium for the whole run; `new_page(width, height, mobile)` opens
a page in a fresh context (its own cookies, viewport and device), closed after the test, and `page` is
one at desktop width. `problems(page)` and `requests(page)` say what a page logged as an error or
warning and what it fetched. No browser is downloaded: Playwright launches /usr/bin/chromium (or the
first Chromium on PATH); without one the tests skip, except under CI=true, where that fails.
"""

from __future__ import annotations

import os
import shutil
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
