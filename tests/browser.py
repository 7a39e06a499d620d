"""Headless Chromium driven over the DevTools protocol, for the tests of reports and published pages.

The protocol runs over a pipe (`--remote-debugging-pipe`: commands in on fd 3, replies out on fd 4,
each a JSON message ended by a NUL byte), so no extra package is needed and no port is opened.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    if os.path.isfile("/usr/bin/chromium"):
        return "/usr/bin/chromium"
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


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
