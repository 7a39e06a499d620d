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
import threading
import time
from collections.abc import Callable

from grader.grading import Backend
from grader.service import jobs
from grader.store import Store

log = logging.getLogger("grader.service")
QUEUE_NAME = "grader"
JOB_ID = re.compile(r"^submission-(\d+)-")
LOST_AFTER_S = 10.0  # a queued submission on no queue for this long was lost by the broker: send it again
RESENT_KEY = "grader:resent:"  # + submission id: which process re-sends a lost submission (one of them)
JOB_TIMEOUT_S = 1800  # RQ's own limit per job; the sandbox's limits end a grading long before


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

    def health(self) -> str:
        """Why the threads take no work, or "" when they can."""
        alive = sum(1 for thread in self.threads[:-1] if thread.is_alive())
        return "" if alive or not self.threads[0].ident else "the grading threads of the server have stopped"

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
                        graded = jobs.grade_next(self.store, backend, self.lease_s, self.share)
                        if graded is None:
                            break
                        log.info("graded %s", jobs.grading_line(self.store, graded, time.monotonic() - started))
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
            except (OperationalError, InterfaceError) as away:  # one line a beat while the store is away
                log.warning("watching the queue: the store cannot be reached (%s); trying again in %g s",
                            str(getattr(away, "orig", None) or away).strip().splitlines()[0][:200], beat)
            except Exception:
                log.exception("recovering stale gradings failed")

    def stop(self) -> None:
        self.stopping.set()
        for _ in self.threads:
            self.pending.put(None)
        for thread in self.threads[:-1]:  # the grading threads close their waiting sandboxes as they end
            if thread.is_alive():
                thread.join(timeout=5)


def redis_connection(url: str):
    from redis import Redis

    return Redis.from_url(url)


class RQDispatcher:
    """Sends "grade submission n" to the RQ queue on Redis; `grader worker` processes take them."""

    def __init__(self, store: Store, broker_url: str, lease_s: float = jobs.DEFAULT_LEASE_S) -> None:
        from rq import Queue

        self.store, self.lease_s = store, lease_s
        self.queue = Queue(QUEUE_NAME, connection=redis_connection(broker_url))
        self.stopping = threading.Event()
        self.watcher = threading.Thread(target=self.watch, name="queue-watch", daemon=True)

    def start(self) -> None:
        self.watcher.start()

    def enqueue(self, submission_id: int) -> None:
        import secrets

        self.queue.enqueue_call("grader.service.queue_worker.grade", args=(submission_id,),
                                job_id=f"submission-{submission_id}-{secrets.token_hex(4)}",
                                timeout=JOB_TIMEOUT_S, result_ttl=600, failure_ttl=24 * 3600)

    def health(self) -> str:
        """Why no worker takes the queue's work, or "" when one listens."""
        from rq import Worker

        try:
            listening = Worker.count(queue=self.queue)
        except Exception:  # Redis is away: the queue cannot be reached
            return "the queue (Redis) cannot be reached"
        return "" if listening else "no `grader worker` is listening on the queue"

    def resend_lost(self) -> list[int]:
        """Queued in the store, on no queue in Redis (Redis restarted, or a send failed): send again.
        Every web server and worker watches, so each re-send is first claimed in Redis itself (SET NX,
        for LOST_AFTER_S): however many processes find the same submission lost at once, one sends it."""
        on_queue = {int(m.group(1)) for j in self.queue.get_job_ids() if (m := JOB_ID.match(j))}
        sent = []
        cutoff = time.time() - LOST_AFTER_S
        for sub in jobs.queued_since(self.store, before=cutoff):
            if sub not in on_queue and self.queue.connection.set(f"{RESENT_KEY}{sub}", 1, nx=True,
                                                                 ex=int(LOST_AFTER_S)):
                self.enqueue(sub)
                sent.append(sub)
        return sent

    def watch(self) -> None:
        from redis.exceptions import RedisError
        from sqlalchemy.exc import InterfaceError, OperationalError

        beat = max(1.0, self.lease_s / 3)
        while not self.stopping.wait(beat):
            try:
                for submission_id in jobs.recover(self.store):
                    self.enqueue(submission_id)
                self.resend_lost()
            except (OperationalError, InterfaceError, RedisError) as away:
                # Redis or the store is away for a moment: one line a beat, and try again at the next.
                log.warning("watching the queue: %s cannot be reached (%s); trying again in %g s",
                            "Redis" if isinstance(away, RedisError) else "the store",
                            str(getattr(away, "orig", None) or away).strip().splitlines()[0][:200], beat)
            except Exception:
                log.exception("watching the queue failed")

    def stop(self) -> None:
        self.stopping.set()
