"""The store is the truth: nothing is lost when a part of the service dies.

Scaled out: `grader serve --broker` in front of a real Redis (RQ) and `grader worker` processes sharing
a real PostgreSQL store; workers are killed with SIGKILL or stopped with SIGTERM in the middle of a
grading, Redis restarts empty or is away, PostgreSQL restarts, two stores share one Redis. Embedded:
`grader serve` killed with submissions waiting, then started again. Every submission is still graded,
and stored exactly once. Every process a test starts is stopped at its end whatever happened, and
looked for afterwards (the `started` fixture)."""

from __future__ import annotations

import logging
import re
import secrets
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.helpers import EXERCISE, PROJECT, REFERENCE, STUB, mutant_file, wait_until
from tests.processes import Started
from tests.servers import fresh_database
from tests.service import Server, child_env, grader_command, import_roster, signed_in

MUTANT = mutant_file("03_skip_blocked_head")
LEASE_S = "6"
STUDENTS = 8
NO_WORKER = "No `grader worker` is listening on the queue."
# The reference, four seconds a call: its grading lasts minutes, so a worker is surely in the middle of it.
SLOW = REFERENCE.read_text() + textwrap.dedent("""
    import time as _time

    _schedule = Scheduler.schedule


    def _slowly(self):
        _time.sleep(4)
        return _schedule(self)


    Scheduler.schedule = _slowly
""")


@pytest.fixture
def started():
    """The processes a test starts: stopped at its end whatever happened, and checked gone."""
    processes = Started()
    try:
        yield processes
    finally:
        problems = processes.close()
    assert not problems, "\n".join(problems)


@pytest.fixture
def database(postgres_url):
    """A database of its own in the shared PostgreSQL cluster."""
    return fresh_database(postgres_url)


def start_worker(started: Started, name: str, redis_url: str, db: str, log_path: Path,
                 *options: str) -> subprocess.Popen:
    log = log_path.open("w")
    started.after(log.close)
    worker = subprocess.Popen(grader_command("worker", "--broker", redis_url, "--db", db, "--sandbox", "local",
                                             "--lease", LEASE_S, *options),
                              cwd=PROJECT, env=child_env(), stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    started.track(name, worker)
    return worker


def start_server(started: Started, log: Path, *args: str) -> Server:
    server = Server.start(log, *args)
    started.track("serve", server.process)
    started.after(server.stop)  # its clients; the process is the fixture's to stop
    return server


def engine_of(started: Started, url: str, **options):
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"), **options)
    started.after(engine.dispose)
    return engine


def rows(engine, query: str) -> list:
    with engine.connect() as connection:
        return connection.execute(text(query)).all()


def submission_ids(queue) -> list[int]:
    from grader.service.dispatch import JOB_ID

    return sorted(int(m.group(1)) for job in queue.get_job_ids() if (m := JOB_ID.search(job)))


@pytest.mark.slow
def test_killed_worker_and_restarted_redis_lose_nothing_and_grade_each_submission_once(
        tmp_path, redis_server, database, started):
    server = start_server(started, tmp_path / "serve.log", "--broker", redis_server.url, "--db", database,
                          "--sandbox", "local", "--lease", LEASE_S)
    for n in range(2):
        start_worker(started, f"worker-{n}", redis_server.url, database, tmp_path / f"worker-{n}.log")
    engine = engine_of(started, database)
    instructor, csrf = signed_in(server, server.instructor_link)
    roster = "id,tier\n" + "".join(f"s{n},premium\n" for n in range(STUDENTS))
    links = import_roster(server, instructor, csrf, roster)
    sources = [REFERENCE, STUB, MUTANT]
    for n in range(STUDENTS):
        client, token = signed_in(server, links[f"s{n}"])
        client.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "1"})
        done = client.post(f"/exercises/{EXERCISE}/submit",
                           data={"csrf": token, "code": sources[n % 3].read_text() + f"\n# {n}\n"})
        assert re.search(r"/submissions/\d+$", str(done.url)), done.text
    assert len(rows(engine, "SELECT id FROM submissions")) == STUDENTS  # stored before queued

    # Both workers busy: killing one (and its sandbox, as when its machine dies) kills a grading in the middle.
    wait_until(lambda: len(rows(engine, "SELECT id FROM submissions WHERE state = 'grading'")) == 2,
               120, "two gradings under way")
    started.kill("worker-0")
    # Down longer than rq's own retry (2 s), so the surviving worker meets a broker that is gone; back
    # empty: the queue's messages are lost, the store still knows what waits.
    redis_server.restart(down_s=4)

    wait_until(lambda: not rows(engine, "SELECT id FROM submissions WHERE state <> 'graded'"), 300,
               "every submission graded by the surviving worker")
    counts = dict(rows(engine, "SELECT submission_id, count(*) FROM scorecards GROUP BY submission_id"))
    assert len(counts) == STUDENTS and set(counts.values()) == {1}
    retried = rows(engine, "SELECT id FROM submissions WHERE attempts > 0")
    assert retried, "the grading killed with its worker was given to the other worker"
    scores = {sid: (score, top) for sid, score, top in rows(engine, "SELECT submission_id, score, max_score "
                                                                     "FROM scorecards")}
    statuses = {s for (s,) in rows(engine, "SELECT status FROM scorecards")}
    assert statuses == {"graded"}, statuses
    full = sum(1 for score, top in scores.values() if score == top)
    assert full == len([n for n in range(STUDENTS) if n % 3 == 0])
    # The surviving worker says what it graded, one line a grading, and that it lost the broker, without a
    # traceback.
    log = (tmp_path / "worker-1.log").read_text()
    said = re.findall(r"grader worker: graded submission=(\d+) outcome=graded score=(\d+)/(\d+) seconds=[\d.]+", log)
    assert said and all(scores[int(sid)] == (int(score), int(top)) for sid, score, top in said), said
    assert "Traceback" not in log, log


@pytest.mark.slow
def test_a_web_server_killed_with_work_waiting_grades_it_all_once_restarted(tmp_path, started):
    """The embedded default: the store (SQLite) is the truth for the grading threads too."""
    db = tmp_path / "class.db"
    args = ("--db", str(db), "--sandbox", "local", "--workers", "1", "--lease", "4")
    server = Server.start(tmp_path / "first.log", *args)
    started.track("first serve", server.process)
    started.after(server.stop)
    instructor, csrf = signed_in(server, server.instructor_link)
    links = import_roster(server, instructor, csrf, "id\n" + "".join(f"w{n}\n" for n in range(4)))
    for n in range(4):
        client, token = signed_in(server, links[f"w{n}"])
        client.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "1"})
        client.post(f"/exercises/{EXERCISE}/submit", data={"csrf": token, "code": REFERENCE.read_text() + f"\n# {n}\n"})
    started.kill("first serve")  # no goodbye: whatever was under way is cut off
    engine = create_engine(f"sqlite:///{db}")
    started.after(engine.dispose)
    assert len(rows(engine, "SELECT id FROM submissions")) == 4
    waiting = len(rows(engine, "SELECT id FROM submissions WHERE state <> 'graded'"))
    assert waiting > 0, "the server was killed before it could grade everything"
    again = Server.start(tmp_path / "second.log", *args)
    started.track("second serve", again.process)
    started.after(again.stop)
    wait_until(lambda: not rows(engine, "SELECT id FROM submissions WHERE state <> 'graded'"), 240,
               "everything graded after the restart")
    counts = dict(rows(engine, "SELECT submission_id, count(*) FROM scorecards GROUP BY submission_id"))
    assert len(counts) == 4 and set(counts.values()) == {1}
    assert {s for (s,) in rows(engine, "SELECT status FROM scorecards")} == {"graded"}


@pytest.mark.unit
def test_a_workers_message_grades_the_submission_whose_turn_it_is(tmp_path, monkeypatch):
    """On the broker's path too, a student's many submissions wait behind everyone else's first: a
    message names a submission, the store says whose turn it is, and each message grades one."""
    from grader.core.backend import PlainBackend
    from grader.core.scorecard import Scorecard
    from grader.course.store import Store
    from grader.service import jobs
    from grader.service import queue_worker as worker

    order: list[bytes] = []

    def grade(data: bytes, exercise, tier, backend, name=None, diagnose=None) -> Scorecard:
        order.append(data)
        return Scorecard(exercise=EXERCISE, tier="free", submission_sha256="x", status="graded", score=1,
                         max_score=1)

    monkeypatch.setattr(jobs, "grade_bytes", grade)
    with Store(tmp_path / "s.db") as store:
        monkeypatch.setattr(worker, "_config",
                            worker.WorkerConfig("", "local", 60, store, PlainBackend(lambda *_: None, "fake")))
        alice = [jobs.submit(store, "alice", EXERCISE, "free", "scheduler.py", f"a{n}".encode())[0]
                 for n in range(2)]
        bob = jobs.submit(store, "bob", EXERCISE, "free", "scheduler.py", b"b0")[0]
        # Another worker holds Alice's first: the message of her second grades Bob's.
        assert jobs.claim(store, alice[0], lease_s=60)
        assert worker.grade(alice[1]) == bob
        assert worker.grade(bob) == alice[1]  # Bob's message, its submission done: the next in line
        assert worker.grade(bob) is None and order == [b"b0", b"a1"]
        assert [len(store.scorecards(i)) for i in (alice[1], bob)] == [1, 1]


@pytest.mark.unit
def test_a_worker_whose_late_result_is_dropped_says_so_and_why_instead_of_graded(tmp_path, monkeypatch, capsys):
    from sqlalchemy import update

    from grader.core.backend import PlainBackend
    from grader.core.scorecard import Scorecard
    from grader.course.store import Store
    from grader.db import schema
    from grader.service import jobs
    from grader.service import queue_worker as worker

    with Store(tmp_path / "s.db") as store:
        (sid, _) = jobs.submit(store, "ada", EXERCISE, "free", "scheduler.py", b"x = 1\n")

        def grade(data: bytes, exercise, tier, backend, name=None, diagnose=None) -> Scorecard:
            # While this grader works, its claim runs out (it was too slow to renew) and another grader takes it.
            s = schema.submissions
            with store.transaction() as db:
                db.execute(update(s).where(s.c.id == sid).values(lease_until=time.time() - 1))
            assert jobs.recover(store) == [sid] and jobs.claim(store, sid, lease_s=60)
            return Scorecard(exercise=EXERCISE, tier="free", submission_sha256="x", status="graded", score=1,
                             max_score=1)

        monkeypatch.setattr(jobs, "grade_bytes", grade)
        monkeypatch.setattr(worker, "_config",
                            worker.WorkerConfig("", "local", 60, store, PlainBackend(lambda *_: None, "fake")))
        assert worker.grade(sid) == sid
        assert store.scorecards(sid) == []
    said = capsys.readouterr().err
    assert re.search(rf"grader worker: not stored submission={sid} seconds=[\d.]+: result dropped: this grader's "
                     r"claim ran out before it finished .*, and another grader is grading the submission now", said), said
    assert "graded submission" not in said


def test_the_queue_says_why_grading_stops_and_logs_an_unreachable_redis_once(tmp_path, caplog):
    """Without a broker that answers, health() says so at once; the submissions sent meanwhile are kept
    in the store, with one line in the log for all of them and no traceback. Gradings whose grader
    went silent are said too, from the store: the claim run out, then the submission waiting again."""
    from sqlalchemy import update

    from grader.core.backend import PlainBackend
    from grader.course.store import Store
    from grader.db import schema
    from grader.service import jobs
    from grader.service.dispatch import RQDispatcher, ThreadDispatcher

    with Store(tmp_path / "s.db") as store:
        ids = [jobs.submit(store, f"s{n}", EXERCISE, "free", "scheduler.py", f"x = {n}\n".encode())[0]
               for n in range(3)]
        queue = RQDispatcher(store, "redis://127.0.0.1:9/0")  # nothing listens on the discard port
        with caplog.at_level(logging.INFO, "grader"):
            for sid in ids:
                queue.enqueue(sid)  # stored first: nothing raises, nothing is lost
            assert queue.health() == ["The queue (Redis) cannot be reached (Connection refused)."]
        lines = [r for r in caplog.records if r.name.startswith("grader")]
        assert len(lines) == 1 and lines[0].exc_info is None, [r.getMessage() for r in lines]
        assert lines[0].getMessage().startswith("the queue (Redis) cannot be reached (Error 111 connecting to "
                                                "127.0.0.1:9. Connection refused.)")
        assert jobs.queued_ids(store) == ids

        # A grader that stops renewing its claim: said once the claim has run out, then while it waits again.
        assert jobs.claim(store, ids[0], lease_s=60)
        s = schema.submissions
        with store.transaction() as db:
            db.execute(update(s).where(s.c.id == ids[0]).values(lease_until=time.time() - 12))
        lapsed = [p for p in queue.health() if p.startswith(f"The grader of submission {ids[0]} has not renewed")]
        assert lapsed and "ran out 12 s ago: it died or cannot reach the store" in lapsed[0], queue.health()
        assert jobs.recover(store) == [ids[0]]
        assert f"Submission {ids[0]} lost its grader and waits to be graded again (after 3 lost gradings a " \
               "submission gets an error scorecard)." in queue.health()

        threads = ThreadDispatcher(store, lambda: PlainBackend(lambda *_: None, "fake"), workers=1)
        assert not any("threads" in p for p in threads.health()), "threads not started yet are not stopped ones"
        threads.start()
        threads.stop()
        wait_until(lambda: "The grading threads of the server have stopped: restart `grader serve`."
                   in threads.health(), 10, "stopped threads said")


@pytest.mark.slow
def test_two_stores_on_one_redis_never_see_each_others_messages_claims_or_workers(
        tmp_path, redis_server, postgres_url, started):
    """Two courses (or a test run beside a service) on one Redis: each store's queue, messages, re-send
    claims, registries and workers are its own, and carry its name."""
    from redis import Redis
    from rq.group import Group

    from grader.course.store import Store
    from grader.service import jobs
    from grader.service.dispatch import RQDispatcher

    redis = Redis.from_url(redis_server.url)
    before = {key.decode() for key in redis.scan_iter()}
    urls = [fresh_database(postgres_url) for _ in range(2)]
    stores = [Store(url) for url in urls]
    for store in stores:
        started.after(store.close)
        for n in range(2):  # the same submission numbers in both, queued a minute ago and on no queue: lost
            store.add_submission(f"s{n}", EXERCISE, "free", f"{n}" * 64, "scheduler.py", STUB.read_bytes(),
                                 state="queued", queued_at=time.time() - 60)
    one, other = (RQDispatcher(store, redis_server.url) for store in stores)
    assert one.queue.name != other.queue.name
    assert RQDispatcher(stores[0], redis_server.url).queue.name == one.queue.name  # the store's, every time
    # Each store sends its own lost submissions again: the other's re-send claims on the same numbers and
    # the other's messages for them hold nothing up.
    assert one.resend_lost() == [1, 2]
    assert other.resend_lost() == [1, 2]
    assert submission_ids(one.queue) == submission_ids(other.queue) == [1, 2]

    # A worker of the first store grades the first store's submissions, and leaves the other's messages.
    worker = start_worker(started, "worker", redis_server.url, urls[0], tmp_path / "worker.log", "--burst")
    assert worker.wait(timeout=240) == 0, (tmp_path / "worker.log").read_text()
    assert jobs.queued_ids(stores[0]) == [] and len(stores[0].scorecards(1)) == len(stores[0].scorecards(2)) == 1
    assert jobs.queued_ids(stores[1]) == [1, 2] and submission_ids(other.queue) == [1, 2]

    shared = {one.queue.redis_queues_keys, "rq:workers", Group.REDIS_GROUP_CLEANING_KEY}  # RQ's own indexes
    written = {key.decode() for key in redis.scan_iter()} - before - shared
    ours = {key for key in written if one.queue.name in key}
    theirs = {key for key in written if other.queue.name in key}
    assert ours and theirs and written == ours | theirs, sorted(written - ours - theirs)
    assert not ours & theirs
    redis.delete(*written)


@pytest.mark.slow
def test_a_worker_stops_within_seconds_of_sigterm_in_the_middle_of_a_grading_and_gives_it_back(
        tmp_path, redis_server, database, started):
    """RQ's own stop would wait for the grading to end: minutes for a submission that runs to its time
    limits. The worker abandons it (its sandbox ended) and gives the submission back, in its place in line
    and with no lost grading counted; its message ends cleanly, in no registry."""
    from rq.registry import FailedJobRegistry, StartedJobRegistry

    from grader.course.store import Store
    from grader.service import jobs
    from grader.service.dispatch import LOST_AFTER_S, RQDispatcher

    store = Store(database)
    started.after(store.close)
    queue = RQDispatcher(store, redis_server.url, lease_s=float(LEASE_S))
    log = tmp_path / "worker.log"
    worker = start_worker(started, "worker", redis_server.url, database, log)
    (sid, _) = jobs.submit(store, "ada", EXERCISE, "premium", "scheduler.py", SLOW.encode())
    queue.enqueue(sid)
    wait_until(lambda: jobs.status(store, sid).state == "grading", 120, "the worker grading")
    time.sleep(3)  # well into it: the sandbox runs the tests

    took = started.stop("worker", grace_s=60)
    assert took is not None and took < 10, f"the worker stopped {took} s after SIGTERM:\n{log.read_text()}"
    assert worker.returncode == 0
    said = log.read_text()
    assert "grader worker: SIGTERM: stopping: the grading under way is abandoned and goes back to the queue" in said
    assert f"grader worker: submission {sid} goes back to the queue: its grading was stopped" in said
    assert "Traceback" not in said, said
    assert jobs.status(store, sid).state == "queued" and not any("lost its grader" in p for p in queue.health())
    assert store.scorecards(sid) == []
    assert queue.queue.connection.zcard(StartedJobRegistry(queue=queue.queue).key) == 0
    assert FailedJobRegistry(queue=queue.queue).count == 0
    # Queued and on no queue: the watchers send it again.
    wait_until(lambda: queue.resend_lost() == [sid], LOST_AFTER_S + 10, "the submission sent again")


@pytest.mark.slow
def test_a_worker_waiting_for_the_store_stops_within_seconds_of_sigterm(tmp_path, redis_server, started):
    from grader.course.store import Store
    from grader.service import jobs
    from grader.service.dispatch import RQDispatcher
    from tests.servers import Postgres

    cluster = Postgres()
    started.track("postgres", lambda: cluster.process, signal.SIGINT)
    started.after(cluster.close)
    database = fresh_database(cluster.url)
    store = Store(database)
    started.after(store.close)
    queue = RQDispatcher(store, redis_server.url, lease_s=float(LEASE_S))
    (sid, _) = jobs.submit(store, "ada", EXERCISE, "premium", "scheduler.py", STUB.read_bytes())
    log = tmp_path / "worker.log"
    start_worker(started, "worker", redis_server.url, database, log)
    wait_until(lambda: queue.workers() == 1, 60, "the worker listening")
    store.close()
    cluster.stop()
    queue.send(sid)  # Redis alone: the worker takes it, and waits for the store
    wait_until(lambda: "grader worker: the store cannot be reached" in log.read_text(), 60, "the worker waiting")

    took = started.stop("worker", grace_s=60)
    assert took is not None and took < 10, f"the worker stopped {took} s after SIGTERM:\n{log.read_text()}"
    assert "grader worker: SIGTERM: stopping" in log.read_text()


@pytest.mark.slow
def test_an_idle_worker_whose_command_listener_is_between_two_waits_stops_in_a_second(redis_server):
    """RQ listens for its commands in a thread that waits up to 60 s at a time for a subscription, and
    redis-py waits for that thread when a worker stops: caught at that moment (one stop in five), an
    idle worker took a minute to leave after SIGTERM. Here that moment is made on purpose."""
    from redis import Redis

    from grader.service.queue_worker import GradingWorker

    worker = GradingWorker(f"grader-test-{secrets.token_hex(4)}", Redis.from_url(redis_server.url))
    worker.subscribe()
    wait_until(lambda: worker.pubsub.subscribed, 10, "the listener subscribed")
    worker.pubsub.unsubscribe()  # what a stop does first: the listener, unsubscribed, waits for a subscription
    wait_until(lambda: not worker.pubsub.subscribed, 10, "the listener unsubscribed")
    began = time.monotonic()
    worker.unsubscribe()
    assert time.monotonic() - began < 5


@pytest.mark.slow
def test_a_killed_worker_is_seen_dead_in_seconds_and_its_message_leaves_rqs_registries(
        tmp_path, redis_server, database, started, caplog):
    from rq.registry import FailedJobRegistry, StartedJobRegistry

    from grader.course.store import Store
    from grader.service import jobs
    from grader.service.dispatch import HEARTBEAT_TTL_S, RQDispatcher, drop_abandoned

    store = Store(database)
    started.after(store.close)
    queue = RQDispatcher(store, redis_server.url, lease_s=float(LEASE_S))
    assert queue.health() == [NO_WORKER]
    start_worker(started, "worker", redis_server.url, database, tmp_path / "worker.log")
    wait_until(lambda: queue.health() == [], 60, "the worker listening")
    (sid, _) = jobs.submit(store, "ada", EXERCISE, "premium", "scheduler.py", SLOW.encode())
    queue.enqueue(sid)
    wait_until(lambda: jobs.status(store, sid).state == "grading", 120, "the worker grading")
    time.sleep(3)  # its message in RQ's started registry, its heartbeats going

    started.kill("worker")  # SIGKILL: it and its sandbox, as when its machine dies
    wait_until(lambda: NO_WORKER in queue.health(), HEARTBEAT_TTL_S + 15, "the dead worker seen dead")
    # Its claim runs out a lease after its last renewal: said, then once the watchers put the submission
    # back (as `recover` does here), that it waits to be graded again.
    wait_until(lambda: any(f"submission {sid} has not renewed its claim" in p for p in queue.health()),
               float(LEASE_S) + 15, "the lapsed claim said")
    assert jobs.recover(store) == [sid]
    assert any(f"Submission {sid} lost its grader" in p for p in queue.health())

    # Its message: dropped from RQ's started registry (the store has the submission), never filed as failed.
    registry = StartedJobRegistry(queue=queue.queue)
    assert queue.queue.connection.zcard(registry.key) == 1
    with caplog.at_level(logging.WARNING, "grader.service"):
        assert drop_abandoned(queue.queue) == [sid]
        assert drop_abandoned(queue.queue) == []
    assert re.search(rf"worker {queue.queue.name}-\S+ stopped answering \(last heard from \d+ s ago\) while it ran "
                     rf"the message of submission {sid}: the message is dropped", caplog.text), caplog.text
    assert queue.queue.connection.zcard(registry.key) == 0
    assert FailedJobRegistry(queue=queue.queue).count == 0


@pytest.mark.slow
def test_while_redis_is_away_submissions_are_kept_and_the_logs_say_so_once_and_when_it_is_back(
        tmp_path, database, started):
    from tests.servers import Redis

    broker = Redis(tmp_path)
    started.track("redis", lambda: broker.process)
    server = start_server(started, tmp_path / "serve.log", "--broker", broker.url, "--db", database,
                          "--sandbox", "local", "--lease", LEASE_S)
    start_worker(started, "worker", broker.url, database, tmp_path / "worker.log")
    engine = engine_of(started, database)
    instructor, csrf = signed_in(server, server.instructor_link)
    links = import_roster(server, instructor, csrf, "id\n" + "".join(f"r{n}\n" for n in range(3)))
    clients = [signed_in(server, links[f"r{n}"]) for n in range(3)]
    broker.stop()
    for n, (client, token) in enumerate(clients):
        client.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "1"})
        done = client.post(f"/exercises/{EXERCISE}/submit", data={"csrf": token, "code": STUB.read_text() + f"# {n}\n"})
        assert re.search(r"/submissions/\d+$", str(done.url)), done.text  # taken, and its page shown
        assert "The queue (Redis) cannot be reached (Connection refused)." in done.text
    time.sleep(3)  # the watchers find it away too
    broker.start()

    wait_until(lambda: len(rows(engine, "SELECT id FROM submissions WHERE state = 'graded'")) == 3, 180,
               "every submission graded once Redis is back")
    assert set(dict(rows(engine, "SELECT submission_id, count(*) FROM scorecards GROUP BY submission_id"))
               .values()) == {1}
    serve = (tmp_path / "serve.log").read_text()
    assert "Traceback" not in serve, serve
    assert len(re.findall(r"the queue \(Redis\) cannot be reached \(Error 111 connecting to 127\.0\.0\.1:\d+\. "
                          r"Connection refused\.\): submissions are kept queued in the store and sent once it is back",
                          serve)) == 1, serve
    assert len(re.findall(r"the queue \(Redis\) is back after \d+ s", serve)) == 1, serve
    worker = (tmp_path / "worker.log").read_text()
    assert "Traceback" not in worker, worker
    assert "grader worker: the queue (Redis) is back after" in worker, worker


@pytest.mark.slow
def test_a_worker_refuses_sqlite_and_waits_longer_each_time_for_a_broker_it_never_reached(
        tmp_path, database, started):
    from grader.cli import main

    assert main(["worker", "--broker", "redis://127.0.0.1:9/0", "--db", str(tmp_path / "class.db")]) == 2
    log_path = tmp_path / "worker.log"
    start_worker(started, "worker", "redis://127.0.0.1:9/0", database, log_path)  # nothing listens on the discard port
    wait_until(lambda: log_path.read_text().count("cannot reach the broker") >= 3, 60,
               "three attempts to reach the broker")
    took = started.stop("worker")
    assert took is not None and took < 10, f"the worker stopped {took} s after SIGTERM"
    said = log_path.read_text()
    assert "lost the broker" not in said, said  # it never had one to lose
    waits = [float(w) for w in re.findall(r"cannot reach the broker at redis://127\.0\.0\.1:9/0 .*; trying again in ([\d.]+) s", said)]
    assert waits[:3] == [1, 2, 4], said


@pytest.mark.slow
def test_a_store_restart_mid_run_sends_no_message_to_the_failed_registry_and_grades_each_once(
        tmp_path, redis_server, started):
    """PostgreSQL stops in the middle of the gradings and comes back: the workers wait for it (saying
    so, a line a try, each wait longer) holding their messages, instead of failing every queued job in a
    second; then everything is graded, once, and each worker stops in seconds when asked."""
    from redis import Redis
    from rq import Queue
    from rq.registry import FailedJobRegistry

    from grader.course.store import Store
    from grader.service.dispatch import queue_name
    from tests.servers import Postgres

    cluster = Postgres()
    started.track("postgres", lambda: cluster.process, signal.SIGINT)
    started.after(cluster.close)
    database = fresh_database(cluster.url)
    server = start_server(started, tmp_path / "serve.log", "--broker", redis_server.url, "--db", database,
                          "--sandbox", "local", "--lease", LEASE_S)
    for n in range(2):
        start_worker(started, f"worker-{n}", redis_server.url, database, tmp_path / f"worker-{n}.log")
    engine = engine_of(started, database, pool_pre_ping=True)
    instructor, csrf = signed_in(server, server.instructor_link)
    links = import_roster(server, instructor, csrf, "id,tier\n" + "".join(f"p{n},premium\n" for n in range(10)))
    for n in range(10):
        client, token = signed_in(server, links[f"p{n}"])
        client.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "1"})
        client.post(f"/exercises/{EXERCISE}/submit",
                    data={"csrf": token, "code": [REFERENCE, MUTANT][n % 2].read_text() + f"\n# {n}\n"})
    wait_until(lambda: rows(engine, "SELECT id FROM scorecards"), 120, "a first grading done")
    engine.dispose()
    cluster.restart(down_s=8)  # with gradings under way and messages waiting
    wait_until(lambda: not rows(engine, "SELECT id FROM submissions WHERE state <> 'graded'"), 300,
               "every submission graded once the store was back")
    counts = dict(rows(engine, "SELECT submission_id, count(*) FROM scorecards GROUP BY submission_id"))
    assert len(counts) == 10 and set(counts.values()) == {1}, counts
    assert {s for (s,) in rows(engine, "SELECT status FROM scorecards")} == {"graded"}
    with Store(database) as store:
        name = queue_name(store)
    failed = FailedJobRegistry(queue=Queue(name, connection=Redis.from_url(redis_server.url)))
    assert failed.count == 0, f"{failed.count} message(s) in RQ's failed registry"
    said = "".join((tmp_path / f"worker-{n}.log").read_text() for n in range(2))
    assert "the store cannot be reached" in said, said[-2000:]
    assert said.count("\n") < 200, f"{said.count(chr(10))} lines of worker log for an 8 s outage"
    for n in range(2):
        took = started.stop(f"worker-{n}")
        assert took is not None and took < 10, f"worker {n} stopped {took} s after SIGTERM"


@pytest.mark.slow
def test_submissions_sent_while_postgresql_is_down_are_kept_then_stored_and_graded_once(
        tmp_path, redis_server, started):
    """PostgreSQL stops; students signed in before it did submit meanwhile. Each submission is
    acknowledged as kept (202), waits in serve's spool, is stored once PostgreSQL is back, with the moment
    it arrived as its time, and is graded once. The figures measured are in every failure message."""
    from datetime import datetime, timezone

    from tests.servers import Postgres

    sent, students = 12, 6
    cluster = Postgres()
    started.track("postgres", lambda: cluster.process, signal.SIGINT)
    started.after(cluster.close)
    database = fresh_database(cluster.url)
    spool = tmp_path / "spool"
    server = start_server(started, tmp_path / "serve.log", "--broker", redis_server.url, "--db", database,
                          "--sandbox", "local", "--lease", LEASE_S, "--spool", str(spool))
    for n in range(2):
        start_worker(started, f"worker-{n}", redis_server.url, database, tmp_path / f"worker-{n}.log")
    engine = engine_of(started, database, pool_pre_ping=True)
    instructor, csrf = signed_in(server, server.instructor_link)
    links = import_roster(server, instructor, csrf, "id,tier\n" + "".join(f"o{n},premium\n" for n in range(students)))
    browsers = []
    for n in range(students):
        client, token = signed_in(server, links[f"o{n}"])
        client.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "1"})
        browsers.append((client, token))
    engine.dispose()

    cluster.stop()
    down_at = datetime.now(timezone.utc).replace(microsecond=0)
    stopped = time.monotonic()
    statuses = []
    for n in range(sent):
        client, token = browsers[n % students]
        page = client.post(f"/exercises/{EXERCISE}/submit",
                           data={"csrf": token, "code": [REFERENCE, MUTANT][n % 2].read_text() + f"\n# {n}\n"})
        statuses.append((page.status_code, "kept on this server" in page.text))
    kept = sum(1 for status, said in statuses if status == 202 and said)
    waiting = len(list(spool.glob("*.json")))
    time.sleep(max(0.0, 8 - (time.monotonic() - stopped)))  # down 8 s at least, as a restart or a failover
    cluster.start()
    up_at = datetime.now(timezone.utc)
    back = time.monotonic()
    figures = {"sent": sent, "kept": kept, "spooled": waiting, "down_s": round(back - stopped, 1)}

    def stored() -> int:
        return len(rows(engine, "SELECT id FROM submissions"))

    wait_until(lambda: stored() >= sent, 60, f"every kept submission stored ({figures})", every_s=0.05)
    figures["drained_in_s"] = round(time.monotonic() - back, 2)
    wait_until(lambda: not rows(engine, "SELECT id FROM submissions WHERE state <> 'graded'"), 300,
               f"every stored submission graded ({figures})")
    figures["graded_in_s"] = round(time.monotonic() - back, 1)
    subs = rows(engine, "SELECT id, submitted_at FROM submissions")
    cards = dict(rows(engine, "SELECT submission_id, count(*) FROM scorecards GROUP BY submission_id"))
    figures.update(stored=len(subs), scorecards=sum(cards.values()))
    print(f"database outage: {figures}")
    assert kept == sent == waiting, (statuses, figures)
    assert len(subs) == sent and len(cards) == sent and set(cards.values()) == {1}, figures
    moments = sorted(datetime.fromisoformat(at) for _, at in subs)
    assert down_at <= moments[0] and moments[-1] <= up_at, (moments[0], moments[-1], down_at, up_at, figures)
    assert not list(spool.glob("*.json")), f"files left in the spool ({figures})"
    said = (tmp_path / "serve.log").read_text()
    assert said.count("kept in the spool") == sent and "Traceback" not in said, said[-3000:]


@pytest.mark.slow
def test_processes_recovering_lost_messages_at_once_send_one_message_per_submission(tmp_path, redis_server):
    """Every web server and worker re-sends what the broker lost; three of them at the same moment still
    put one message per submission on the queue."""
    import threading

    from grader.course.store import Store
    from grader.db import schema
    from grader.service.dispatch import RQDispatcher

    store = Store(tmp_path / "class.db")
    store.migrate()
    for n in range(5):
        store.add_submission(f"s{n}", EXERCISE, "premium", f"{n}" * 64, "scheduler.py", b"x = 1\n", state="queued",
                             queued_at=time.time() - 60)  # queued a minute ago, and on no queue: lost
    assert len(store.submissions()) == 5
    with store.transaction() as db:
        assert db.execute(schema.submissions.select().where(schema.submissions.c.state == "queued")).all()
    dispatchers = [RQDispatcher(store, redis_server.url) for _ in range(3)]
    start = threading.Barrier(3)

    def recover(dispatcher: RQDispatcher) -> None:
        start.wait()
        dispatcher.resend_lost()

    threads = [threading.Thread(target=recover, args=(d,)) for d in dispatchers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert submission_ids(dispatchers[0].queue) == [1, 2, 3, 4, 5]
    for dispatcher in dispatchers:  # and again: a message on the queue is not lost
        dispatcher.resend_lost()
    assert submission_ids(dispatchers[0].queue) == [1, 2, 3, 4, 5]
    dispatchers[0].queue.empty()
    store.close()
