"""`grader serve`: the web application, its store and its graders in one process, or the web
application alone in front of a Redis queue and `grader worker` processes (`--broker`)."""

from __future__ import annotations

import logging
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from grader.core.exercise import Exercise, ExerciseError, load_exercise, project_root
from grader.core.suite_tests import check_tests
from grader.course.store import Store
from grader.sandbox.choose import choose_backend
from grader.service import accounts, jobs
from grader.service.spool import Drainer, Spool, default_folder
from grader.web.app import LtiPages, create_app
from grader.web.base import DEFAULT_INTERVAL_S, DEFAULT_MAX_REQUEST, Service
from grader.web.connections import ConnectionBook, RequestLimit, raise_file_limit, server_options

log = logging.getLogger("grader.web")


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    db: str = "grader.db"
    broker: str | None = None
    workers: int = 2
    sandbox: str = "auto"
    submission_interval_s: float = DEFAULT_INTERVAL_S
    max_request_kb: int = DEFAULT_MAX_REQUEST // 1024
    lease_s: float = jobs.DEFAULT_LEASE_S
    base_url: str | None = None  # the public address (public_address's form); None: the one listened on
    spool: str | None = None  # where submissions wait while the store is away; None: beside the store


def load_exercises() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for toml in sorted((project_root() / "exercises").glob("*/exercise.toml")):
        try:
            exercise = load_exercise(toml.parent.name)
            check_tests(exercise)
        except ExerciseError as exc:
            log.warning("exercise %s left out: %s", toml.parent.name, exc)
            continue
        found[exercise.slug] = exercise
    return found


def base_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def public_address(text: str) -> str:
    """The address browsers reach the service at, as `--base-url` gives it (https://grader.example.edu/),
    without its last slash; ValueError saying what is wrong with it. Its links are made from it, and an
    https one makes the cookies Secure. The service answers at the root of a host: its pages link to
    /instructor, /exercises/..., so an address with a path would print links that lead nowhere."""
    if not text.strip() or any(c.isspace() or not c.isprintable() for c in text.strip()):
        raise ValueError(f"{text!r} is not an address: give one such as https://grader.example.edu/")
    text = text.strip()
    if "://" not in text:
        raise ValueError(f"{text!r} has no scheme: give the whole address, such as https://{text.rstrip('/')}/")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"{text!r}: the scheme must be https (or http), not {parts.scheme!r}")
    if "?" in text:
        raise ValueError(f"{text!r} has a query (?{parts.query}): give the address alone")
    if "#" in text:
        raise ValueError(f"{text!r} has a fragment (#{parts.fragment}): give the address alone")
    if "@" in parts.netloc:
        raise ValueError(f"{text!r} holds a user name or password: give the address alone")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if not parts.hostname or port == -1 or port == 0:
        raise ValueError(f"{text!r} names no host (and port) that browsers can reach")
    if parts.path not in ("", "/"):
        raise ValueError(f"{text!r} has a path ({parts.path}): the service answers at the root of its address, "
                         "so give the host's address alone and serve it at the root")
    return f"{scheme}://{parts.netloc}"


def log_to_stderr() -> None:
    """The service's own lines (a request, a grading, a problem) on standard error with their time, unless
    whoever embeds it set up logging already."""
    logger = logging.getLogger("grader")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def serve(options: ServeOptions, out: TextIO = sys.stdout, lti: LtiPages | None = None) -> None:
    """Serve until stopped; with `lti`, its pages too and its grades sent to the LMSs while it serves."""
    log_to_stderr()
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as listener:  # closed however serving ends
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((options.host, options.port))
        listener.listen(128)
        serve_on(listener, options, out, lti)


def serve_on(listener: socket.socket, options: ServeOptions, out: TextIO, lti: LtiPages | None) -> None:
    """`serve` on a socket that listens already."""
    import uvicorn

    from grader.service.dispatch import RQDispatcher, ThreadDispatcher

    store = Store(options.db)
    port = listener.getsockname()[1]
    listening = base_url(options.host, port)
    url = options.base_url or listening
    if options.broker:
        dispatcher: ThreadDispatcher | RQDispatcher = RQDispatcher(store, options.broker, options.lease_s)
        how = f"queue {options.broker.split('@')[-1]} (start graders with `grader worker`)"
    else:
        name = choose_backend(options.sandbox).name
        # Each grading thread keeps a sandbox ready for the next submission of the same exercise and tier.
        dispatcher = ThreadDispatcher(store, lambda: choose_backend(options.sandbox, warm=True), options.workers,
                                      options.lease_s)
        how = f"{options.workers} grading thread(s) in this process, {name} sandbox"
    spool = Spool(Path(options.spool) if options.spool else default_folder(store))
    service = Service(store=store, dispatcher=dispatcher, exercises=load_exercises(), base_url=url,
                      submission_interval_s=options.submission_interval_s,
                      max_request_bytes=options.max_request_kb * 1024, spool=spool)
    # Stores what the spool holds (files left by a serve stopped during an outage at once), then every
    # few seconds what arrives while the store is away.
    drainer = Drainer(spool, store, dispatcher.enqueue)
    token = accounts.new_link(store, "instructor")
    public = "" if url == listening else f" (public address {url}/)"
    print(f"grader serving {len(service.exercises)} exercise(s) at {listening}/{public} from {store.describe()}; "
          f"{how}", file=out)
    print(f"submissions that arrive while the store is away wait in {spool.folder}", file=out)
    print(f"instructor sign-in (works once): {service.link(token)}", file=out, flush=True)
    dispatcher.start()
    drainer.start()
    scores = lti.start(service) if lti is not None else None
    # A bounded number of requests at once, each body whole within the Guard's time, each request head within
    # the connections' time, and few connections waiting per address (grader.web.connections): however many
    # clients open connections or uploads and stall, what they hold stays bounded and no one else waits.
    raise_file_limit()
    config = uvicorn.Config(RequestLimit(create_app(service, lti)), log_level="warning", access_log=False,
                            lifespan="off", timeout_graceful_shutdown=5, **server_options(ConnectionBook()))
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        drainer.stop()
        if scores is not None:
            scores.stop()
        dispatcher.stop()
        store.close()
