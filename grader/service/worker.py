"""`grader worker --broker URL --db URL`: an RQ worker that grades submissions from the shared store.

RQ (on Redis) carries only "grade submission n"; the submission, its claim and its scorecard live in
the store (PostgreSQL when workers run on several machines). A `SimpleWorker` runs the jobs in its
own process, so one store connection pool and one sandbox backend serve every job it takes.
"""

from __future__ import annotations

import os
import threading

from grader.sandbox.choose import choose_backend
from grader.service import jobs
from grader.service.dispatch import QUEUE_NAME, RQDispatcher, redis_connection
from grader.store import Store

_stores: dict[tuple[int, str], Store] = {}
_backends: dict[tuple[int, str], tuple] = {}
_lock = threading.Lock()


def _store(db_url: str) -> Store:
    with _lock:
        key = (os.getpid(), db_url)
        if key not in _stores:
            _stores[key] = Store(db_url)
        return _stores[key]


def grade(submission_id: int, db_url: str, sandbox: str, lease_s: float) -> bool:
    """The RQ job: claim, grade and store one submission (a no-op if it is taken or done)."""
    key = (os.getpid(), sandbox)
    with _lock:
        if key not in _backends:
            _backends[key] = choose_backend(sandbox)
    return jobs.grade_submission(_store(db_url), submission_id, _backends[key], lease_s)


def run_worker(broker_url: str, db_url: str, sandbox: str = "auto", lease_s: float = jobs.DEFAULT_LEASE_S,
               burst: bool = False) -> None:
    from rq import Queue, SimpleWorker

    store = _store(db_url)
    choose_backend(sandbox)  # fail now when the sandbox is unavailable, not in the first job
    connection = redis_connection(broker_url)
    # This worker also watches for gradings that died elsewhere, so nothing waits for a web server.
    watcher = RQDispatcher(store, broker_url, db_url, sandbox, lease_s)
    watcher.start()
    try:
        SimpleWorker([Queue(QUEUE_NAME, connection=connection)], connection=connection).work(
            burst=burst, logging_level="WARNING")
    finally:
        watcher.stop()
