"""The store is the truth: nothing is lost when a part of the service dies.

Scaled out: `grader serve --broker` in front of a real Redis (RQ) and two `grader worker` processes
sharing a real PostgreSQL store; one worker is killed with SIGKILL in the middle of a grading and
Redis restarts empty. Embedded: `grader serve` killed with submissions waiting, then started again.
Every submission is still graded, and stored exactly once."""

from __future__ import annotations

import os
import re
import signal
import subprocess

import pytest
from sqlalchemy import create_engine, text

from tests.helpers import EXERCISE, PROJECT, REFERENCE, STUB, wait_until
from tests.servers import fresh_database
from tests.service import Server, child_env, grader_command, import_roster, signed_in

pytestmark = pytest.mark.slow
MUTANT = PROJECT / "solutions" / EXERCISE / "mutants" / "03_skip_blocked_head.py"
LEASE_S = "6"
STUDENTS = 8


@pytest.fixture
def database(postgres_url):
    """A database of its own in the shared PostgreSQL cluster."""
    return fresh_database(postgres_url)


def start_worker(redis_url: str, db: str, log) -> subprocess.Popen:
    return subprocess.Popen(grader_command("worker", "--broker", redis_url, "--db", db, "--sandbox", "local",
                                           "--lease", LEASE_S),
                            cwd=PROJECT, env=child_env(), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop_all(engine, workers: list[subprocess.Popen], logs: list, server: Server) -> None:
    """The end of a scaled-out test: its connections, its workers (whatever they run), their logs, serve."""
    engine.dispose()
    for worker in workers:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
    for log in logs:
        log.close()
    server.stop()


def rows(engine, query: str) -> list:
    with engine.connect() as connection:
        return connection.execute(text(query)).all()


def test_killed_worker_and_restarted_redis_lose_nothing_and_grade_each_submission_once(
        tmp_path, redis_server, database):
    server = Server.start(tmp_path / "serve.log", "--broker", redis_server.url, "--db", database,
                          "--sandbox", "local", "--lease", LEASE_S)
    logs = [open(tmp_path / f"worker-{n}.log", "w") for n in range(2)]
    workers = [start_worker(redis_server.url, database, log) for log in logs]
    engine = create_engine(database.replace("postgresql://", "postgresql+psycopg://"))
    try:
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

        # Both workers busy: killing one kills a grading in the middle.
        wait_until(lambda: len(rows(engine, "SELECT id FROM submissions WHERE state = 'grading'")) == 2,
                   120, "two gradings under way")
        os.killpg(workers[0].pid, signal.SIGKILL)
        workers[0].wait()
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
        # The surviving worker says what it graded, one line a grading.
        logs[1].flush()
        said = re.findall(r"grader worker: graded submission=(\d+) outcome=graded score=(\d+)/(\d+) seconds=[\d.]+",
                          (tmp_path / "worker-1.log").read_text())
        assert said and all(scores[int(sid)] == (int(score), int(top)) for sid, score, top in said), said
    finally:
        stop_all(engine, workers, logs, server)


def test_a_web_server_killed_with_work_waiting_grades_it_all_once_restarted(tmp_path):
    """The embedded default: the store (SQLite) is the truth for the grading threads too."""
    db = tmp_path / "class.db"
    args = ("--db", str(db), "--sandbox", "local", "--workers", "1", "--lease", "4")
    server = Server.start(tmp_path / "first.log", *args)
    try:
        instructor, csrf = signed_in(server, server.instructor_link)
        links = import_roster(server, instructor, csrf, "id\n" + "".join(f"w{n}\n" for n in range(4)))
        for n in range(4):
            client, token = signed_in(server, links[f"w{n}"])
            client.post(f"/exercises/{EXERCISE}/prediction", data={"csrf": token, "choice": "1"})
            client.post(f"/exercises/{EXERCISE}/submit",
                        data={"csrf": token, "code": REFERENCE.read_text() + f"\n# {n}\n"})
    finally:
        os.killpg(server.process.pid, signal.SIGKILL)  # no goodbye: whatever was under way is cut off
        server.process.wait()
    engine = create_engine(f"sqlite:///{db}")
    try:
        assert len(rows(engine, "SELECT id FROM submissions")) == 4
        waiting = len(rows(engine, "SELECT id FROM submissions WHERE state <> 'graded'"))
        assert waiting > 0, "the server was killed before it could grade everything"
        again = Server.start(tmp_path / "second.log", *args)
        try:
            wait_until(lambda: not rows(engine, "SELECT id FROM submissions WHERE state <> 'graded'"), 240,
                       "everything graded after the restart")
        finally:
            again.stop()
        counts = dict(rows(engine, "SELECT submission_id, count(*) FROM scorecards GROUP BY submission_id"))
        assert len(counts) == 4 and set(counts.values()) == {1}
        assert {s for (s,) in rows(engine, "SELECT status FROM scorecards")} == {"graded"}
    finally:
        engine.dispose()


def test_a_workers_message_grades_the_submission_whose_turn_it_is(tmp_path, monkeypatch):
    """On the broker's path too, a student's many submissions wait behind everyone else's first: a
    message names a submission, the store says whose turn it is, and each message grades one."""
    from grader.grading import PlainBackend
    from grader.scorecard import Scorecard
    from grader.service import jobs
    from grader.service import queue_worker as worker
    from grader.store import Store

    order: list[bytes] = []

    def grade(data: bytes, exercise, tier, backend, name=None) -> Scorecard:
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


def test_a_worker_refuses_sqlite_and_waits_longer_each_time_for_a_broker_it_never_reached(tmp_path, database):
    from grader.cli import main

    assert main(["worker", "--broker", "redis://127.0.0.1:9/0", "--db", str(tmp_path / "class.db")]) == 2
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        worker = start_worker("redis://127.0.0.1:9/0", database, log)  # nothing listens on the discard port
        try:
            wait_until(lambda: log_path.read_text().count("cannot reach the broker") >= 3, 60,
                       "three attempts to reach the broker")
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
    said = log_path.read_text()
    assert "lost the broker" not in said, said  # it never had one to lose
    waits = [float(w) for w in re.findall(r"cannot reach the broker at redis://127\.0\.0\.1:9/0 .*; trying again in ([\d.]+) s", said)]
    assert waits[:3] == [1, 2, 4], said


def test_a_store_restart_mid_run_sends_no_message_to_the_failed_registry_and_grades_each_once(
        tmp_path, redis_server):
    """PostgreSQL stops in the middle of the gradings and comes back: the workers wait for it (saying
    so, a line a try, each wait longer) holding their messages, instead of failing every queued job in a
    second; then everything is graded, once."""
    from redis import Redis
    from rq import Queue
    from rq.registry import FailedJobRegistry

    from grader.service.dispatch import QUEUE_NAME
    from tests.servers import Postgres

    cluster = Postgres()
    database = fresh_database(cluster.url)
    server = Server.start(tmp_path / "serve.log", "--broker", redis_server.url, "--db", database,
                          "--sandbox", "local", "--lease", LEASE_S)
    logs = [open(tmp_path / f"worker-{n}.log", "w") for n in range(2)]
    workers = [start_worker(redis_server.url, database, log) for log in logs]
    engine = create_engine(database.replace("postgresql://", "postgresql+psycopg://"), pool_pre_ping=True)
    try:
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
        failed = FailedJobRegistry(queue=Queue(QUEUE_NAME, connection=Redis.from_url(redis_server.url)))
        assert failed.count == 0, f"{failed.count} message(s) in RQ's failed registry"
        for log in logs:
            log.flush()
        said = "".join((tmp_path / f"worker-{n}.log").read_text() for n in range(2))
        assert "the store cannot be reached" in said, said[-2000:]
        assert said.count("\n") < 200, f"{said.count(chr(10))} lines of worker log for an 8 s outage"
    finally:
        stop_all(engine, workers, logs, server)
        cluster.close()


def test_processes_recovering_lost_messages_at_once_send_one_message_per_submission(tmp_path, redis_server):
    """Every web server and worker re-sends what the broker lost; three of them at the same moment still
    put one message per submission on the queue."""
    import threading
    import time

    from grader.db import schema
    from grader.service.dispatch import RQDispatcher
    from grader.store import Store

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
    ids = dispatchers[0].queue.get_job_ids()
    assert len(ids) == 5 and len({i.split("-")[1] for i in ids}) == 5, ids
    for dispatcher in dispatchers:  # and again: a message on the queue is not lost
        dispatcher.resend_lost()
    assert len(dispatchers[0].queue.get_job_ids()) == 5
    dispatchers[0].queue.empty()
    store.close()
