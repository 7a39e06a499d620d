"""`grader worker --broker URL --db URL`: an RQ worker that grades submissions from the shared store.

RQ (on Redis) carries only "grade submission n"; the submission, its claim and its scorecard live in
the store (PostgreSQL when workers run on several machines). A `SimpleWorker` runs the jobs in its
own process, so one store connection pool and one sandbox backend serve every job it takes, and each
worker grades with its own --sandbox and --lease whatever the web server was started with.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from grader.db.engine import sqlite_path
from grader.errors import StoreError
from grader.grading import Backend
from grader.sandbox.choose import choose_backend
from grader.sandbox.local import LocalBackend
from grader.service import jobs
from grader.service.dispatch import QUEUE_NAME, RQDispatcher, redis_connection
from grader.store import Store


@dataclass
class WorkerConfig:
    """What this worker process grades with: its own store URL, sandbox and lease (set by run_worker)."""
    db_url: str
    sandbox: str
    lease_s: float
    store: Store
    backend: Backend


_config: WorkerConfig | None = None
RECONNECT_S = 1.0  # the first wait before trying a broker that did not answer again
RECONNECT_MAX_S = 30.0  # the longest: the wait doubles up to it while the broker stays away


def grade(submission_id: int) -> int | None:
    """The RQ job: claim, grade and store one submission, and return its id (None when nothing waits).
    Every queued submission has a message, so one message is one grading; the store says which
    (`jobs.claim_next`: the oldest of the student with the fewest gradings under way), not the
    message's `submission_id`, so one student's many submissions wait behind everyone else's first.
    The job whose submission was graded by another message grades the next in line, or nothing.
    It runs in the worker's own process (SimpleWorker), with the store and sandbox that `run_worker`
    set up."""
    if _config is None:
        raise RuntimeError("grader.service.queue_worker.grade runs inside `grader worker` only")
    started = time.monotonic()
    graded = _while_the_store_is_away(lambda: jobs.grade_next(_config.store, _config.backend, _config.lease_s))
    if graded is not None:  # one line a grading, for whoever runs the worker
        print(f"grader worker: graded {jobs.grading_line(_config.store, graded, time.monotonic() - started)}",
              file=sys.stderr, flush=True)
    return graded


STORE_WAIT_S = 900.0  # how long a job waits for a store that went away before it gives its message up


def _while_the_store_is_away(step: Callable[[], int | None]) -> int | None:
    """`step()`, tried again while the store cannot be reached (a PostgreSQL restart, a failover), the
    wait doubling up to RECONNECT_MAX_S. The job keeps its message meanwhile: an outage does not send
    every waiting message to RQ's failed registry in a second, and the others stay queued in Redis.
    What a grading cut off by the outage had claimed returns to the queue when its lease runs out."""
    from sqlalchemy.exc import InterfaceError, OperationalError

    wait_s, gave_up = RECONNECT_S, time.monotonic() + STORE_WAIT_S
    while True:
        try:
            return step()
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() + wait_s > gave_up:
                raise
            reason = str(exc.orig or exc).strip().splitlines()[0][:200]
            print(f"grader worker: the store cannot be reached ({reason}); trying again in {wait_s:g} s",
                  file=sys.stderr, flush=True)
            time.sleep(wait_s)
            wait_s = min(2 * wait_s, RECONNECT_MAX_S)


def run_worker(broker_url: str, db_url: str, sandbox: str = "auto", lease_s: float = jobs.DEFAULT_LEASE_S,
               burst: bool = False) -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from rq import Queue, SimpleWorker

    global _config
    if sqlite_path(db_url) is not None:
        raise StoreError(f"--db {db_url}: grader worker grades from the store that `grader serve` and every other "
                         "worker share: give a PostgreSQL URL (postgresql://USER@HOST/NAME). An SQLite file is one "
                         "machine's; there `grader serve` grades by itself, without --broker")
    store = Store(db_url)
    # The sandbox is chosen now, so a worker without the sandbox it was asked for fails at once; warm, as
    # `grader serve`'s own gradings are: a sandbox made ready for the next submission while one is graded.
    backend = choose_backend(sandbox, warm=True)
    if isinstance(backend, LocalBackend):
        backend.lanes = 1  # workers grade side by side: they are the parallelism, not lanes
    _config = WorkerConfig(db_url, sandbox, lease_s, store, backend)
    connection = redis_connection(broker_url)
    # This worker also watches for gradings that died elsewhere, so nothing waits for a web server.
    watcher = RQDispatcher(store, broker_url, lease_s)
    watcher.start()
    reached, wait_s = False, RECONNECT_S
    try:
        while True:
            worker = None
            try:  # making a worker talks to the broker too
                connection.ping()
                reached, wait_s = True, RECONNECT_S
                worker = SimpleWorker([Queue(QUEUE_NAME, connection=connection)], connection=connection)
                worker.work(burst=burst, logging_level="WARNING")
                return  # stopped by a signal, or out of work in burst mode
            except RedisConnectionError as exc:
                # The broker went away (a restart, a failover): what waits is in the store, and the
                # watcher queues it again once the broker is back. Wait for it rather than leave.
                if burst:
                    raise
                if getattr(worker, "_stop_requested", False):
                    return
                # rq's handlers would only mark the old worker as stopping: a signal now ends this one.
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                what = "lost the broker" if reached else f"cannot reach the broker at {broker_url.split('@')[-1]}"
                print(f"grader worker: {what} ({exc}); trying again in {wait_s:g} s", file=sys.stderr, flush=True)
                time.sleep(wait_s)
                wait_s = min(2 * wait_s, RECONNECT_MAX_S)
    finally:
        watcher.stop()
        backend.close()
        store.close()
