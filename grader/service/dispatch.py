"""Running the gradings: threads inside `grader serve`, or RQ workers on Redis (`--broker`).

Both read the same store and use the same claim-and-lease steps (jobs.py); the queue only says
"grade one submission" (a message names one, but the store says whose turn it is). Either can lose
a message (a restart, a dead worker) without losing a submission: a watcher puts back whatever the
store says is waiting and is on no queue.
"""

from __future__ import annotations

import logging
import queue
import re
import secrets
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from grader.core.backend import Backend
from grader.course.store import Store
from grader.db import schema
from grader.service import jobs

if TYPE_CHECKING:
    from redis import Redis
    from rq import Queue

log = logging.getLogger("grader.service")
QUEUE_PREFIX = "grader-"  # + the store's queue id: the name of its queue in Redis
QUEUE_ID_SETTING = "queue_id"  # the store's settings row that holds that id
JOB_ID = re.compile(r"-submission-(\d+)-[0-9a-f]+$")
LOST_AFTER_S = 10.0  # a queued submission on no queue for this long was lost by the broker: send it again
JOB_TIMEOUT_S = 1800  # RQ's own limit per job; the sandbox's limits end a grading long before
# A `grader worker` says it is alive every HEARTBEAT_S, grading or not; its registration in Redis runs out
# HEARTBEAT_TTL_S after its last word, and then it counts as dead. The message it was running stays in RQ's
# started registry for EXECUTION_TTL_S more: long enough for a watcher to drop it before RQ's own clean-up
# would file it as failed (the store, not RQ, says what is to be graded again).
HEARTBEAT_S = 5.0
HEARTBEAT_TTL_S = 20
EXECUTION_TTL_S = 90


def store_away(away: Exception, beat: float) -> None:
    """What a watcher says on each beat while the store cannot be reached: one line, the first of the
    database driver's own reason."""
    why = str(getattr(away, "orig", None) or away).strip().splitlines()[0][:200]
    log.warning("watching the queue: the store cannot be reached (%s); trying again in %g s", why, beat)


class ThreadDispatcher:
    """`workers` threads grading from the store, each with its own sandbox backend.

    The in-process queue only wakes the threads ("something was queued"); which submission a thread
    grades is the store's to say (`jobs.claim_next`): the oldest of the student with the fewest
    gradings under way, and never one of a student who already holds all threads but one, so a
    student whose submissions each run to the time limit cannot keep everyone else waiting."""

    def __init__(self, store: Store, make_backend: Callable[[], Backend], workers: int = 2,
                 lease_s: float = jobs.DEFAULT_LEASE_S) -> None:
        self.store, self.make_backend, self.lease_s = store, make_backend, lease_s
        # With one thread there is nothing to share: the lone student is graded, one at a time.
        self.share = max(1, workers - 1)
        self.pending: queue.Queue[int | None] = queue.Queue()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.work, name=f"grade-{n}", daemon=True) for n in range(workers)]
        self.threads.append(threading.Thread(target=self.watch, name="grade-watch", daemon=True))

    def start(self) -> None:
        # The store is the truth: whatever a previous run left queued or half-graded is graded now.
        for submission_id in jobs.queued_ids(self.store):
            self.pending.put(submission_id)
        for thread in self.threads:
            thread.start()

    def enqueue(self, submission_id: int) -> None:
        self.pending.put(submission_id)

    def health(self) -> list[str]:
        """What keeps gradings from being done now, a plain sentence each (none when all is well)."""
        problems = []
        if self.threads[0].ident and not any(thread.is_alive() for thread in self.threads[:-1]):
            problems.append("The grading threads of the server have stopped: restart `grader serve`.")
        return problems + jobs.lost_gradings(self.store)

    def work(self) -> None:
        backend = self.make_backend()
        try:
            while not self.stopping.is_set():
                if self.pending.get() is None:
                    return
                # Grade while there is something this thread may take. A submission passed over for its
                # student's share is taken by the thread that ends that student's grading, which
                # looks again here; a wake-up that finds nothing to take costs one query.
                while not self.stopping.is_set():
                    try:
                        started = time.monotonic()
                        ended = jobs.grade_next(self.store, backend, self.lease_s, self.share)
                        if ended is None:
                            break
                        line = ended.line(self.store, time.monotonic() - started)
                        log.log(logging.INFO if ended.stored else logging.WARNING, "%s", line)
                    except Exception:  # the store was unreachable: the lease runs out and the watcher requeues it
                        log.exception("grading a submission failed")
                        break
        finally:
            backend.close()  # the sandbox waiting for the next submission

    def watch(self) -> None:
        from sqlalchemy.exc import InterfaceError, OperationalError

        beat = max(1.0, self.lease_s / 3)
        while not self.stopping.wait(beat):
            try:
                for submission_id in jobs.recover(self.store):
                    self.pending.put(submission_id)
                # A wake-up lost to a store error in a thread would leave its submission waiting for
                # the next one to come in: look at the queue on every beat too.
                if jobs.queued_ids(self.store):
                    self.pending.put(-1)
            except (OperationalError, InterfaceError) as away:
                store_away(away, beat)
            except Exception:
                log.exception("recovering stale gradings failed")

    def stop(self) -> None:
        self.stopping.set()
        for _ in self.threads:
            self.pending.put(None)
        for thread in self.threads[:-1]:  # the grading threads close their waiting sandboxes as they end
            if thread.is_alive():
                thread.join(timeout=5)


def redis_connection(url: str) -> Redis:
    from redis import Redis

    # A Redis that does not answer (a host gone, a firewall dropping packets) is given up on in seconds,
    # so a page that asks about the queue never hangs on it.
    return Redis.from_url(url, socket_connect_timeout=5)


def queue_name(store: Store) -> str:
    """The name of this store's queue in Redis: `grader-` and the store's own random id, kept in its
    settings (made by the first process that asks). Every key the queue writes carries it (its
    messages, their registries, the re-send claims, the workers' names), so stores that share one Redis
    (two courses, a test run beside a service) never see each other's work. The id is the store's, not
    its URL's: serve and the workers may spell the URL differently (a host alias, a password) and must
    still meet on one queue."""
    s = schema.settings
    with store.reading() as db:
        found = db.execute(select(s.c.value).where(s.c.key == QUEUE_ID_SETTING)).scalar()
    if found is None:
        try:
            with store.transaction() as db:
                db.execute(insert(s).values(key=QUEUE_ID_SETTING, value=secrets.token_hex(8)))
        except IntegrityError:
            pass  # another process made it at the same moment: theirs is the store's
        with store.reading() as db:
            found = db.execute(select(s.c.value).where(s.c.key == QUEUE_ID_SETTING)).scalar()
    return f"{QUEUE_PREFIX}{found}"


def first_line(exc: BaseException) -> str:
    """An error's message for a one-line log: its first line (its kind when it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def why_unreachable(exc: BaseException) -> str:
    """A Redis error's cause in a few words, without the address (`Connection refused`), for pages that
    students see too."""
    text = first_line(exc)
    found = re.match(r"Error -?\d+ connecting to \S+?\. (.+)", text)
    return (found.group(1) if found else text).rstrip(".")


class BrokerState:
    """Whether Redis answered the last time this process asked. Its log says when it stops answering,
    with the cause, and when it is back: two lines an outage, however many submissions come meanwhile
    (each is kept queued in the store, and sent once Redis is back)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.down_since: float | None = None

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            first = self.down_since is None
            if first:
                self.down_since = time.monotonic()
        if first:
            log.warning("the queue (Redis) cannot be reached (%s): submissions are kept queued in the store "
                        "and sent once it is back", first_line(exc))

    def answered(self) -> None:
        with self.lock:
            since, self.down_since = self.down_since, None
        if since is not None:
            log.info("the queue (Redis) is back after %.0f s: what waited is sent again", time.monotonic() - since)


def drop_abandoned(queue: Queue) -> list[int]:
    """Drop from RQ's started registry the messages of workers that died while running them (killed,
    or their machine gone): their registration ran out (HEARTBEAT_TTL_S without a word). The store,
    not the message, holds the submission: its claim runs out and it is queued and sent again. Left to
    RQ, such a message would stay in the started registry for its whole timeout, then be filed as failed.
    The ids of the submissions whose messages were dropped (each by one of the processes that look)."""
    from rq.exceptions import NoSuchJobError
    from rq.executions import Execution
    from rq.job import Job
    from rq.registry import StartedJobRegistry
    from rq.worker import Worker

    redis = queue.connection
    registry = StartedJobRegistry(queue=queue)
    dropped = []
    for job_id, execution_id in registry.get_job_and_execution_ids(cleanup=False):
        try:
            execution = Execution.fetch(execution_id, job_id, redis)
            worker, heard = execution.worker_name, f"{time.time() - execution.last_heartbeat.timestamp():.0f} s ago"
        except ValueError:  # the execution's own record ran out too: its worker is long gone
            worker, heard = "", "long ago"
        if worker and redis.exists(Worker.redis_worker_namespace_prefix + worker):
            continue  # alive: it renews its registration every HEARTBEAT_S
        if not redis.zrem(registry.key, f"{job_id}:{execution_id}"):
            continue  # another watcher dropped it first
        try:
            Job.fetch(job_id, connection=redis).delete(remove_from_queue=False)
        except NoSuchJobError:
            pass
        found = JOB_ID.search(job_id)
        submission = int(found.group(1)) if found else 0
        dropped.append(submission)
        log.warning("worker %s stopped answering (last heard from %s) while it ran the message of submission %s: "
                    "the message is dropped from RQ's started registry, and the submission is queued again "
                    "when its claim runs out", worker or "(unknown)", heard, submission)
    return dropped


class RQDispatcher:
    """Sends "grade submission n" to this store's queue on Redis; `grader worker` processes take them."""

    def __init__(self, store: Store, broker_url: str, lease_s: float = jobs.DEFAULT_LEASE_S) -> None:
        from rq import Queue

        self.store, self.lease_s = store, lease_s
        self.queue = Queue(queue_name(store), connection=redis_connection(broker_url))
        self.broker = BrokerState()
        self.stopping = threading.Event()
        self.watcher = threading.Thread(target=self.watch, name="queue-watch", daemon=True)

    def start(self) -> None:
        self.watcher.start()

    def send(self, submission_id: int) -> None:
        self.queue.enqueue_call("grader.service.queue_worker.grade", args=(submission_id,),
                                job_id=f"{self.queue.name}-submission-{submission_id}-{secrets.token_hex(4)}",
                                timeout=JOB_TIMEOUT_S, result_ttl=600, failure_ttl=24 * 3600)

    def enqueue(self, submission_id: int) -> None:
        """Send "grade submission n". While Redis cannot be reached the submission waits in the store,
        where it was written first, and the watcher sends it once Redis is back: the caller is not
        bothered, and the log has one line for the whole outage."""
        from redis.exceptions import RedisError

        try:
            self.send(submission_id)
        except RedisError as exc:
            self.broker.failed(exc)
        else:
            self.broker.answered()

    def resent_key(self, submission_id: int) -> str:
        return f"{self.queue.name}:resent:{submission_id}"

    def resend_lost(self) -> list[int]:
        """Queued in the store, on no queue in Redis (Redis restarted, or a send failed): send again.
        Every web server and worker watches, so each re-send is first claimed in Redis itself (SET NX,
        for LOST_AFTER_S): however many processes find the same submission lost at once, one sends it."""
        on_queue = {int(m.group(1)) for j in self.queue.get_job_ids() if (m := JOB_ID.search(j))}
        sent = []
        cutoff = time.time() - LOST_AFTER_S
        for sub in jobs.queued_since(self.store, before=cutoff):
            if sub not in on_queue and self.queue.connection.set(self.resent_key(sub), 1, nx=True,
                                                                 ex=int(LOST_AFTER_S)):
                self.send(sub)
                sent.append(sub)
        return sent

    def workers(self) -> int:
        """How many `grader worker`s listen on this store's queue now: those whose registration has not
        run out (each renews its own every HEARTBEAT_S; a dead one's runs out HEARTBEAT_TTL_S later)."""
        from rq import Worker
        from rq.worker_registration import clean_worker_registry

        clean_worker_registry(self.queue)
        return Worker.count(queue=self.queue)

    def health(self) -> list[str]:
        """What keeps gradings from being done now, a plain sentence each (none when all is well): Redis
        that cannot be reached, no worker alive, gradings whose grader went silent. Asked afresh each
        time, so a cause shows as soon as it is there and goes once it is gone."""
        from redis.exceptions import RedisError

        problems = []
        try:
            if not self.workers():
                problems.append("No `grader worker` is listening on the queue.")
        except RedisError as exc:
            self.broker.failed(exc)
            problems.append(f"The queue (Redis) cannot be reached ({why_unreachable(exc)}).")
        else:
            self.broker.answered()
        return problems + jobs.lost_gradings(self.store)

    def watch(self) -> None:
        from redis.exceptions import RedisError
        from sqlalchemy.exc import InterfaceError, OperationalError

        beat = max(1.0, self.lease_s / 3)
        while not self.stopping.wait(beat):
            try:
                for submission_id in jobs.recover(self.store):
                    self.enqueue(submission_id)
                self.resend_lost()
                drop_abandoned(self.queue)
                self.broker.answered()
            except RedisError as exc:  # one line when Redis goes, one when it is back
                self.broker.failed(exc)
            except (OperationalError, InterfaceError) as away:
                store_away(away, beat)
            except Exception:
                log.exception("watching the queue failed")

    def stop(self) -> None:
        self.stopping.set()
