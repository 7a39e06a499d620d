"""What every page of the service shares: the `Service` (the store, the graders, the exercises, the
settings), the Jinja pages and the `Page` a handler raises to answer with a message instead.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.datastructures import FormData
from starlette.responses import HTMLResponse

import grader
from grader.core.exercise import Exercise
from grader.course.deadlines import Deadlines
from grader.course.store import Store
from grader.service import accounts
from grader.service.recent_sessions import RecentSessions
from grader.service.spool import Spool

log = logging.getLogger("grader.web")
TEMPLATES = Path(__file__).resolve().parent / "templates"
DEFAULT_INTERVAL_S = 30.0
DEFAULT_MAX_REQUEST = 1024 * 1024
# How long a page answered while the store is away asks the browser to wait before trying again.
RETRY_AFTER_S = 30


class Dispatcher(Protocol):
    def enqueue(self, submission_id: int) -> None: ...

    def health(self) -> list[str]:
        """What keeps the graders from taking work now, a plain sentence each (none when they can)."""
        ...


@dataclass
class Service:
    store: Store
    dispatcher: Dispatcher
    exercises: dict[str, Exercise]
    base_url: str
    submission_interval_s: float = DEFAULT_INTERVAL_S
    max_request_bytes: int = DEFAULT_MAX_REQUEST
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(timezone.utc))
    # Where a submission waits while the store is away (None: it is refused with the outage page), and
    # what this process last read from the store to take it then: recent sessions, the deadlines.
    spool: Spool | None = None
    sessions: RecentSessions = field(default_factory=RecentSessions)
    known_deadlines: Deadlines | None = None

    def link(self, token: str) -> str:
        return f"{self.base_url.rstrip('/')}/signin/{token}"

    @property
    def secure(self) -> bool:
        """Whether browsers reach the service over TLS (its public address is https), so that its cookies
        must never travel in clear."""
        return self.base_url.lower().startswith("https://")

    def interval(self, exercise: Exercise) -> float:
        own = exercise.web.submission_interval_s
        return self.submission_interval_s if own is None else own


@functools.lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals["grader_version"] = grader.__version__
    return env


class Page(Exception):
    """Stop handling and answer with a message page (a refusal, a problem with the form...)."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(environment().get_template(name).render(**context), status_code=status)


def message_page(who: accounts.Session | None, status: int, title: str, message: str) -> HTMLResponse:
    return render("message.html.j2", status=status, who=who, title=title, message=message)


def text_field(form: FormData, name: str) -> str:
    """A form's text field ("" when missing, or sent as a file)."""
    value = form.get(name)
    return value if isinstance(value, str) else ""


def whole_number(text: str, most_digits: int) -> int | None:
    """`text` as a number when it is one in ASCII digits (str.isdigit takes "²", which int() refuses)."""
    return int(text) if re.fullmatch(f"[0-9]{{1,{most_digits}}}", text) else None


def enqueue(service: Service, submission_id: int) -> None:
    """Tell the graders; if the queue is away, the submission is stored as queued all the same and
    the queue's watcher sends it once the queue is back."""
    try:
        service.dispatcher.enqueue(submission_id)
    except Exception:
        log.exception("submission %s stored but not sent to the queue yet", submission_id)
