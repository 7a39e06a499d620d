"""One log line a request: `request method=GET path=/history status=200 ms=12`, key=value for a log
reader. A sign-in link's token is a password: its path is logged without it."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

log = logging.getLogger("grader.web.requests")
SECRET_PATH = re.compile(r"^(/signin/)[^/]+")


def loggable_path(path: str) -> str:
    return SECRET_PATH.sub(r"\1<token>", path)


class AccessLog:
    """ASGI middleware around the whole application (the Guard's refusals included)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = [0]

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            log.info("request method=%s path=%s status=%s ms=%.0f", scope.get("method", ""),
                     loggable_path(scope.get("path", "")), status[0] or "none", (time.monotonic() - started) * 1000)
