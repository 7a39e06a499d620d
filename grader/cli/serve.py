"""`grader serve` and `grader worker`: the web service, and the processes that grade what it queues."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from grader.cli.common import DB_HELP, OK, UsageError, add_sandbox_options, given_address, store_location

if TYPE_CHECKING:
    from rich.console import Console

EXAMPLES = {
    "serve": ["grader serve --port 8000 --workers 2",
              "grader serve --base-url https://grader.example.edu/",
              "grader serve --db postgresql://grader@db/grader --broker redis://localhost:6379/0"],
    "worker": ["grader worker --broker redis://localhost:6379/0 --db postgresql://grader@db/grader"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="the web service: students submit, instructors follow the class")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="the port to listen on")
    serve.add_argument("--db", metavar="PATH|URL", help=DB_HELP + "; a postgresql:// URL with --broker")
    serve.add_argument("--broker", metavar="URL", help="a Redis URL: queue gradings for `grader worker` processes")
    serve.add_argument("--workers", type=int, default=2, help="grading threads in this process (without --broker)")
    add_sandbox_options(serve, unsafe_local=False)
    serve.add_argument("--interval", type=float, default=30.0, metavar="S",
                       help="least seconds between two submissions of a student to an exercise (an exercise's "
                            "[web] submission_interval_s wins)")
    serve.add_argument("--max-request-kb", type=int, default=1024, help="the largest request body accepted")
    serve.add_argument("--lease", type=float, default=60.0, metavar="S",
                       help="a grading whose grader is silent this long is given to another")
    serve.add_argument("--base-url", metavar="URL",
                       help="the address browsers reach the service at, such as https://grader.example.edu/ "
                            "(behind a proxy that ends TLS): the links it prints and shows use it, and with "
                            "https its cookies are Secure (default: http://HOST:PORT)")
    serve.add_argument("--spool", metavar="DIR",
                       help="where a submission that arrives while the database is away waits, on disk, until it "
                            "is stored (default: beside an SQLite store, DB.spool; for a database URL, "
                            "grader-store/spool in the current folder)")
    serve.set_defaults(run=command_serve)

    worker = commands.add_parser("worker", help="grade submissions queued by `grader serve --broker`")
    worker.add_argument("--broker", required=True, metavar="URL", help="the Redis URL given to `grader serve`")
    worker.add_argument("--db", required=True, metavar="URL", help="the store given to `grader serve`")
    add_sandbox_options(worker, unsafe_local=False)
    worker.add_argument("--lease", type=float, default=60.0, metavar="S",
                        help="seconds a claimed grading stays this worker's without a sign of life")
    worker.add_argument("--burst", action="store_true", help="stop when the queue is empty")
    worker.set_defaults(run=command_worker)


def command_serve(args: argparse.Namespace, console: Console) -> int:
    from grader.lti.mount import lti_pages
    from grader.web.serve import ServeOptions, serve

    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.broker and "://" not in (args.db or ""):
        raise UsageError("--broker needs --db with a database URL that the workers share (postgresql://...)")
    serve(ServeOptions(host=args.host, port=args.port, db=store_location(args.db), broker=args.broker,
                       workers=args.workers, sandbox=args.sandbox, submission_interval_s=args.interval,
                       max_request_kb=args.max_request_kb, lease_s=args.lease, base_url=given_address(args),
                       spool=args.spool), lti=lti_pages())
    return OK


def command_worker(args: argparse.Namespace, console: Console) -> int:
    from grader.service.queue_worker import run_worker

    console.print(f"grader worker: taking submissions from {args.broker.split('@')[-1]}", style="dim")
    run_worker(args.broker, store_location(args.db), args.sandbox, args.lease, burst=args.burst)
    return OK
