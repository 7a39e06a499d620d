"""`grader worker --broker URL --db URL`: an RQ worker that grades submissions from the shared store.

RQ (on Redis) carries only "grade submission n"; the submission, its claim and its scorecard live in
the store (PostgreSQL when workers run on several machines). A `SimpleWorker` runs the jobs in its
own process, so one store connection pool and one sandbox backend serve every job it takes, and each
worker grades with its own --sandbox and --lease whatever the web server was started with.

SIGTERM or SIGINT stops a worker in seconds, whatever it is doing: a grading under way is abandoned
(its sandbox ended, its submission given back to the queue for another worker), a wait for the
store or the broker is cut short. A second signal ends it at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from rq import Queue, SimpleWorker
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.job import Job
from rq.worker import WorkerStatus
from rq.worker_registration import register

from grader.core.backend import Backend
from grader.course.store import Store
from grader.db.engine import sqlite_path
from grader.errors import StoreError
from grader.sandbox.choose import choose_backend
from grader.sandbox.local import LocalBackend
from grader.service import dispatch, jobs


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
STOP_WITHIN_S = 15.0  # a worker still there this long after SIGTERM (stuck in a call no signal cuts) leaves anyway
T = TypeVar("T")


def say(line: str) -> None:
    print(f"grader worker: {line}", file=sys.stderr, flush=True)


class Stopping(BaseException):
    """Raised in the worker's main thread by SIGTERM or SIGINT while it grades or waits for the store.
    A BaseException, so that no `except Exception` on the way (the grading's own fail-closed one)
    turns it into a result: the grading is abandoned and its submission given back to the queue."""


class Stop:
    """The worker's stop request. SIGTERM and SIGINT set it, and cut short whatever may be cut: a
    grading or a wait for the store (`Stopping`), the wait for a message (RQ's StopRequested). RQ's
    own handlers would let a grading run to its end, which is minutes for a submission that runs to
    its time limits, or a store outage's 15 minutes."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.finished = threading.Event()  # run_worker has returned: nothing is left to be stuck
        self.worker: GradingWorker | None = None  # the RQ worker taking messages, when one is
        self.cuttable = False  # inside a grading or a wait for the store
        self.previous: dict[int, Any] = {}

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            self.previous.setdefault(signum, signal.signal(signum, self.on_signal))

    def uninstall(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested.is_set():
            raise SystemExit(f"grader worker: {name} again: leaving now")
        self.requested.set()
        # Said from a thread: a print in a signal handler can land inside one the main thread is making.
        threading.Thread(target=self.leave_if_stuck, args=(name, self.cuttable), name="stop-watch",
                         daemon=True).start()
        if self.worker is not None:
            self.worker.stop_soon()
        if self.cuttable:
            raise Stopping()
        if self.worker is not None and not self.worker.busy():
            raise StopRequested()  # out of the wait for a message; RQ's work loop ends on it

    def leave_if_stuck(self, name: str, grading: bool) -> None:
        say(f"{name}: stopping" + (": the grading under way is abandoned and goes back to the queue" if grading else ""))
        if self.finished.wait(STOP_WITHIN_S):
            return
        say(f"still running {STOP_WITHIN_S:g} s after {name} (stuck in a call that no signal cuts short): leaving "
            "now; a claim it held runs out and its submission is graded again")
        os._exit(1)

    @contextlib.contextmanager
    def cuttable_here(self) -> Iterator[None]:
        """A stop request raises `Stopping` inside this block (at once if one came before it)."""
        if self.requested.is_set():
            raise Stopping()
        self.cuttable = True
        try:
            yield
        finally:
            self.cuttable = False

    def pause(self, seconds: float) -> None:
        """Sleep, unless a stop request comes first."""
        self.requested.wait(seconds)


_stop = Stop()


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
    config = _config
    started = time.monotonic()
    try:
        with _stop.cuttable_here():
            ended = _while_the_store_is_away(lambda: jobs.grade_next(config.store, config.backend, config.lease_s))
    except Stopping:
        return None  # the worker is stopping; what it had claimed is back in the queue
    if ended is None:
        return None
    # One line a grading, for whoever runs the worker; a result the store did not take says why.
    say(ended.line(config.store, time.monotonic() - started))
    return ended.submission_id


STORE_WAIT_S = 900.0  # how long a job waits for a store that went away before it gives its message up


def _while_the_store_is_away(step: Callable[[], T]) -> T:
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
            say(f"the store cannot be reached ({reason}); trying again in {wait_s:g} s")
            time.sleep(wait_s)
            wait_s = min(2 * wait_s, RECONNECT_MAX_S)


class BrokerErrorsInOneLine(logging.Filter):
    """RQ's work loop logs a whole traceback when Redis goes away under it (as a message ends, say) and
    ends: the cause in one line instead. `run_worker` says it lost the broker and takes messages again
    once it is back."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, RedisError):
            record.msg, record.args = f"{record.getMessage()} (the broker went away: {dispatch.first_line(error)})", None
            record.exc_info, record.exc_text = None, None
        return True


class GradingWorker(SimpleWorker):
    """A SimpleWorker on one store's queue that says it is alive every HEARTBEAT_S from a thread of its
    own, grading or not (RQ's SimpleWorker says nothing while it runs a job, so a killed one stayed
    registered, its message in RQ's started registry, for the job's whole timeout), and that stops
    when `_stop` says so."""

    def __init__(self, queue: str, connection: Redis) -> None:
        name = f"{queue}-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"
        super().__init__([Queue(queue, connection=connection)], name=name, connection=connection,
                         worker_ttl=dispatch.HEARTBEAT_TTL_S)
        self.running: tuple[Job, Execution] | None = None
        if not any(isinstance(each, BrokerErrorsInOneLine) for each in self.log.filters):
            self.log.addFilter(BrokerErrorsInOneLine())
        self.beating = threading.Event()
        self.beats = threading.Thread(target=self.keep_beating, name="worker-heartbeat", daemon=True)

    # -- stopping ------------------------------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        _stop.install()  # RQ's own would wait for the grading to end

    def stop_soon(self) -> None:
        self._stop_requested = True  # RQ's work loop ends before the next message

    def busy(self) -> bool:
        return bool(self.get_state() == WorkerStatus.BUSY)

    def subscribe(self) -> None:
        # RQ's listener for its commands waits up to 60 s at a time, and redis-py waits for it to end when it
        # is stopped: a worker stopped as such a wait began took a minute to leave. One second here.
        self.pubsub = self.connection.pubsub()
        self.pubsub.subscribe(**{self.pubsub_channel_name: self.handle_payload})
        listener: Any = self.pubsub.run_in_thread(sleep_time=1, daemon=True,
                                                  exception_handler=self._pubsub_exception_handler)
        self.pubsub_thread = listener

    # -- saying it is alive --------------------------------------------------------------------------
    def bootstrap(self, *args: Any, **kwargs: Any) -> None:
        super().bootstrap(*args, **kwargs)
        self.beats.start()

    def teardown(self) -> None:
        self.beating.set()
        if self.beats.is_alive():
            self.beats.join(timeout=5)  # no beat after the death RQ registers now
        try:
            super().teardown()  # type: ignore[no-untyped-call]  # rq leaves BaseWorker.teardown unannotated
        finally:
            # RQ ends its command listener last: when the broker has gone, the steps before fail, and the
            # listener of this worker would be left retrying to reach the broker for as long as the process runs.
            listener: Any = self.pubsub_thread
            if listener is not None and listener.is_alive():
                listener.stop()

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        # Every renewal, RQ's own included, lasts HEARTBEAT_TTL_S: a dead worker is seen dead that soon.
        super().heartbeat(dispatch.HEARTBEAT_TTL_S, pipeline=pipeline)

    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        return dispatch.EXECUTION_TTL_S  # renewed every HEARTBEAT_S while the job runs

    def execute_job(self, job: Job, queue: Queue) -> None:
        execution = self.prepare_execution(job)
        self.running = (job, execution)
        try:
            self.perform_job(job, queue, execution)
        finally:
            self.running = None
        self.set_state(WorkerStatus.IDLE)

    def keep_beating(self) -> None:
        while not self.beating.wait(dispatch.HEARTBEAT_S):
            try:
                self.beat()
            except RedisError:
                continue  # the broker is away: the work loop says so, and this tries again at the next beat

    def beat(self) -> None:
        running = self.running
        with self.connection.pipeline() as pipeline:
            self.heartbeat(pipeline=pipeline)
            register(self, pipeline)  # back in the queue's list of workers if a watcher found it gone
            if running is not None:
                job, execution = running
                execution.heartbeat(job.started_job_registry, dispatch.EXECUTION_TTL_S, pipeline=pipeline)
            made = pipeline.execute()[0]
        if made:  # the registration had run out (Redis restarted, or this machine stalled): whole again
            with self.connection.pipeline() as pipeline:
                pipeline.hset(self.key, mapping=self.serialize())
                pipeline.expire(self.key, dispatch.HEARTBEAT_TTL_S)
                pipeline.execute()

    # -- RQ's clean-up -------------------------------------------------------------------------------
    def clean_registries(self) -> None:
        # The messages of dead workers first, dropped (their submissions are the store's to queue again):
        # RQ's own clean-up would file them as failed.
        for queue in self.queues:
            dispatch.drop_abandoned(queue)
        super().clean_registries()  # type: ignore[no-untyped-call]  # rq leaves it unannotated


def log_to_stderr() -> logging.Handler | None:
    """The service's own lines (the watcher's, a grading's) on standard error as the worker's, unless
    whoever embeds it set up logging already. The handler added, to be taken off at the end."""
    logger = logging.getLogger("grader")
    if logger.handlers:
        return None
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("grader worker: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler


def run_worker(broker_url: str, db_url: str, sandbox: str = "auto", lease_s: float = jobs.DEFAULT_LEASE_S,
               burst: bool = False) -> None:
    global _stop
    if sqlite_path(db_url) is not None:
        raise StoreError(f"--db {db_url}: grader worker grades from the store that `grader serve` and every other "
                         "worker share: give a PostgreSQL URL (postgresql://USER@HOST/NAME). An SQLite file is one "
                         "machine's; there `grader serve` grades by itself, without --broker")
    _stop = Stop()
    _stop.install()
    logged = log_to_stderr()
    try:
        store = Store(db_url)
        try:
            _work(broker_url, store, sandbox, lease_s, burst)
        finally:
            store.close()
    finally:
        _stop.finished.set()
        _stop.uninstall()
        if logged is not None:
            logging.getLogger("grader").removeHandler(logged)


def _work(broker_url: str, store: Store, sandbox: str, lease_s: float, burst: bool) -> None:
    global _config
    # The sandbox is chosen now, so a worker without the sandbox it was asked for fails at once; warm, as
    # `grader serve`'s own gradings are: a sandbox made ready for the next submission while one is graded.
    backend = choose_backend(sandbox, warm=True)
    if isinstance(backend, LocalBackend):
        backend.lanes = 1  # workers grade side by side: they are the parallelism, not lanes
    _config = WorkerConfig(store.location, sandbox, lease_s, store, backend)
    connection = dispatch.redis_connection(broker_url)
    # This worker also watches for gradings that died elsewhere, so nothing waits for a web server.
    watcher = dispatch.RQDispatcher(store, broker_url, lease_s)
    watcher.start()
    reached, wait_s = False, RECONNECT_S
    try:
        while not _stop.requested.is_set():
            try:  # making a worker talks to the broker too
                connection.ping()
                reached, wait_s = True, RECONNECT_S
                worker = GradingWorker(watcher.queue.name, connection)
                _stop.worker = worker
                worker.work(burst=burst, logging_level="WARNING")
                if burst or _stop.requested.is_set():
                    return  # out of work in burst mode, or stopped by a signal
                # RQ's loop also ends by itself on an error it logged (a Redis timeout): take messages again.
                say(f"the work loop ended; taking messages again in {RECONNECT_S:g} s")
                _stop.pause(RECONNECT_S)
            except StopRequested:
                return  # a signal as the worker began or ended
            except RedisConnectionError as exc:
                # The broker went away (a restart, a failover): what waits is in the store, and the
                # watcher queues it again once the broker is back. Wait for it rather than leave.
                if burst:
                    raise
                if _stop.requested.is_set():
                    return
                what = "lost the broker" if reached else f"cannot reach the broker at {broker_url.split('@')[-1]}"
                say(f"{what} ({exc}); trying again in {wait_s:g} s")
                _stop.pause(wait_s)
                wait_s = min(2 * wait_s, RECONNECT_MAX_S)
            finally:
                _stop.worker = None
    finally:
        watcher.stop()
        backend.close()
