"""The store on SQLAlchemy: owner-only files, upgrades of older stores, every grading kept."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import sqlite3
import stat
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from grader.cli import main
from grader.core.backend import PlainBackend
from grader.core.scorecard import Scorecard
from grader.course.store import SCHEMA_VERSION, Store, StoreError, TooSoon
from tests.helpers import EXERCISE, REFERENCE

EARLY = "2026-01-05T09:00:00+00:00"


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_store_its_wal_and_stored_reports_and_gradebooks_are_owner_only(tmp_path):
    db = tmp_path / "class" / "grader.db"
    db.parent.mkdir()
    db.parent.chmod(0o755)
    argv = ["--exercise", EXERCISE, "--tier", "free", "--sandbox", "local", "--db", str(db)]
    assert main(["submit", str(REFERENCE), "--student", "alice", *argv]) == 0
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "bob.py").write_bytes(REFERENCE.read_bytes())
    gradebook = tmp_path / "gradebook.csv"
    assert main(["batch", str(folder), "--gradebook", str(gradebook), *argv]) == 0
    with Store(db):  # open: the -wal and -shm files exist while a connection is open
        wal, shm = db.with_name("grader.db-wal"), db.with_name("grader.db-shm")
        assert wal.exists() and shm.exists()
        assert {p.name: mode(p) for p in (db, wal, shm)} == {p.name: 0o600 for p in (db, wal, shm)}
    reports = db.parent / "reports"
    assert mode(reports) == mode(reports / "alice") == 0o700
    (report,) = (reports / "alice").iterdir()
    assert mode(report) == 0o600 and "<html" in report.read_text().lower()
    assert mode(gradebook) == 0o600 and "bob" in gradebook.read_text()


LEGACY_V2 = """
CREATE TABLE students (id TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE submissions (id INTEGER PRIMARY KEY, student_id TEXT NOT NULL REFERENCES students(id),
    exercise TEXT NOT NULL, tier TEXT NOT NULL, sha256 TEXT NOT NULL, filename TEXT NOT NULL,
    content BLOB NOT NULL, submitted_at TEXT NOT NULL, UNIQUE (student_id, exercise, tier, sha256));
CREATE TABLE scorecards (submission_id INTEGER PRIMARY KEY REFERENCES submissions(id), status TEXT NOT NULL,
    score INTEGER NOT NULL, max_score INTEGER NOT NULL, scorecard TEXT NOT NULL, graded_at TEXT NOT NULL);
CREATE INDEX submissions_by_exercise ON submissions (exercise, student_id);
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO settings (key, value) VALUES ('pseudonym_key', 'feedfeedfeedfeedfeedfeedfeedfeed');
INSERT INTO students VALUES ('alice', '2026-01-01T00:00:00+00:00');
INSERT INTO submissions VALUES (1, 'alice', 'continuous_batching', 'free', 'abc', 'scheduler.py', x'00',
    '2026-01-01T00:00:00+00:00');
PRAGMA user_version = 2;
"""


def small_card(score: int) -> Scorecard:
    return Scorecard(exercise=EXERCISE, tier="free", submission_sha256="abc", status="graded", score=score,
                     max_score=10)


@pytest.mark.unit
def test_a_store_from_before_alembic_is_upgraded_in_place_keeping_its_rows(tmp_path):
    path = tmp_path / "old.db"
    database = sqlite3.connect(path)
    database.executescript(LEGACY_V2)
    database.execute("INSERT INTO scorecards VALUES (1, 'graded', 7, 10, ?, '2026-01-01T00:00:01+00:00')",
                     (small_card(7).to_json(),))
    database.commit()
    database.close()
    with Store(path) as store:
        assert store.version == SCHEMA_VERSION
        (old,) = store.submissions()
        assert old.student == "alice" and old.card is not None and old.card.score == 7 and old.state == "graded"
        assert store.setting("pseudonym_key") == "feedfeedfeedfeedfeedfeedfeedfeed"


@pytest.fixture(params=[pytest.param("sqlite", marks=pytest.mark.unit), "postgresql"])
def location(request, tmp_path):
    """The same schema and migrations on both databases: an SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "s.db")
    from tests.servers import fresh_database

    return fresh_database(request.getfixturevalue("postgres_url"))


def test_a_regrade_keeps_the_old_scorecard_and_the_newest_is_current(location):
    with Store(location) as store:
        assert store.version == SCHEMA_VERSION
        sid, new = store.add_submission("alice", EXERCISE, "free", "abc", "scheduler.py", b"x = 1\n")
        assert new
        store.save_scorecard(sid, small_card(3))
        store.save_scorecard(sid, small_card(8))
        assert [c.score for c in store.scorecards(sid)] == [3, 8]
        assert store.scorecard(sid).score == 8
        assert [s.card.score for s in store.submissions(EXERCISE)] == [8]


def test_submissions_sent_at_once_with_an_interval_are_taken_one_at_a_time(location):
    # The web service's rule: the check of the interval and the insert are one step per student.
    with Store(location) as store:
        store.add_submission("alice", EXERCISE, "free", "warm", "scheduler.py", b"x = 0\n", submitted_at=EARLY)
        start = threading.Barrier(8)

        def send(number: int) -> str:
            start.wait()
            try:
                store.add_submission("bob", EXERCISE, "free", f"sha{number}", "scheduler.py", b"x = 1\n",
                                     interval_s=30)
                return "taken"
            except TooSoon:
                return "too soon"

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            outcomes = sorted(pool.map(send, range(8)))
        assert outcomes == ["taken"] + ["too soon"] * 7
        assert len(store.submissions(EXERCISE, "bob")) == 1
        # Another student, another exercise, or the interval passed: each is taken.
        assert store.add_submission("alice", EXERCISE, "free", "a2", "scheduler.py", b"x = 2\n", interval_s=30)[1]
        later = datetime.now(timezone.utc) + timedelta(seconds=31)
        assert store.add_submission("bob", EXERCISE, "free", "b2", "scheduler.py", b"x = 3\n", interval_s=30,
                                    submitted_at=later.isoformat(timespec="seconds"))[1]


def test_a_rejected_file_does_not_use_up_the_interval(location):
    """A file refused before any test ran (its card says `rejected`, or, still queued, the service's check
    refuses it) starts no wait for the next file that can be graded; rejected files are spaced by the
    interval among themselves, so none of this fills the store."""
    def refused(content: bytes) -> bool:
        return content.startswith(b"def f(:")

    start = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)

    def send(sha: str, content: bytes, after_s: int) -> int:
        moment = (start + timedelta(seconds=after_s)).isoformat(timespec="seconds")
        return store.add_submission("alice", EXERCISE, "free", sha, "scheduler.py", content, interval_s=30,
                                    submitted_at=moment, refused=refused)[0]

    with Store(location) as store:
        store.save_scorecard(send("a", b"x = 1\n", 0), small_card(10))
        broken = send("b", b"def f(:\n", 40)
        store.save_scorecard(broken, dataclasses.replace(small_card(0), status="rejected", reason="syntax error"))
        send("c", b"x = 2\n", 45)  # 5 s after the rejected file: taken, 45 s after the last graded one
        with pytest.raises(TooSoon):
            send("d", b"x = 3\n", 50)  # 5 s after a file that can be graded
        with pytest.raises(TooSoon) as soon:
            send("e", b"def f(:  # again\n", 50)  # 10 s after the last rejected one
        assert soon.value.ready == start + timedelta(seconds=70)
        send("f", b"def f(:  # still queued\n", 71)  # not graded yet: the check refuses it all the same
        send("g", b"x = 4\n", 76)  # 31 s after c; f counts for nothing
        assert [s.sha256 for s in store.submissions(EXERCISE, "alice")] == ["a", "b", "c", "f", "g"]


def test_the_same_file_again_is_graded_again_only_when_its_result_was_an_error(location):
    with Store(location) as store:
        graded, _ = store.add_submission("alice", EXERCISE, "free", "ok", "scheduler.py", b"x = 1\n", submitted_at=EARLY)
        store.save_scorecard(graded, small_card(3))
        assert store.add_submission("alice", EXERCISE, "free", "ok", "scheduler.py", b"x = 1\n", interval_s=0) \
            == (graded, False)
        failed, _ = store.add_submission("carol", EXERCISE, "free", "err", "scheduler.py", b"x = 2\n", submitted_at=EARLY)
        store.save_scorecard(failed, dataclasses.replace(small_card(0), status="error", reason="the grader died"))
        assert store.add_submission("carol", EXERCISE, "free", "err", "scheduler.py", b"x = 2\n", state="queued",
                                    interval_s=0) == (failed, True)
        again = store.submission(failed)
        assert again.state == "queued" and again.submitted_at > EARLY
        assert [c.status for c in store.scorecards(failed)] == ["error"]  # the earlier result is kept


def test_student_ids_that_differ_only_in_case_are_refused(location):
    # One student to a spreadsheet and to a case-insensitive file system (their pages would collide).
    with Store(location) as store:
        store.add_submission("erin", EXERCISE, "free", "a", "scheduler.py", b"x = 1\n")
        with pytest.raises(StoreError, match="'Erin' differs from 'erin' only in case"):
            store.add_submission("Erin", EXERCISE, "free", "b", "scheduler.py", b"x = 2\n")
        assert [s.student for s in store.submissions(EXERCISE)] == ["erin"]


def test_one_students_submissions_never_hold_every_grading_thread(location, monkeypatch):
    """Alice hands in three submissions before Bob's one; two grading threads. Bob's is graded beside
    her first, not after her second, and a thread that comes free does not take her second while her
    first is still grading: one student holds at most all threads but one."""
    from grader.service import jobs
    from grader.service.dispatch import ThreadDispatcher
    from tests.helpers import wait_until

    started: list[str] = []
    gates = {name: threading.Event() for name in ("a0", "a1", "a2", "b0")}

    def grade_when_let_go(data: bytes, exercise, tier, backend, name=None, diagnose=None) -> Scorecard:
        # A grading that lasts until the test lets it end: the claim order is what is looked at.
        started.append(data.decode())
        gates[data.decode()].wait(60)
        return dataclasses.replace(small_card(10), submission_sha256=hashlib.sha256(data).hexdigest())

    monkeypatch.setattr(jobs, "grade_bytes", grade_when_let_go)
    with Store(location) as store:
        ids = {f"a{n}": jobs.submit(store, "alice", EXERCISE, "free", "scheduler.py", f"a{n}".encode())[0]
               for n in range(3)}
        ids["b0"] = jobs.submit(store, "bob", EXERCISE, "free", "scheduler.py", b"b0")[0]
        # Before any thread runs, the line already shows Bob's beside Alice's first.
        assert [jobs.status(store, ids[n]).place for n in ("a0", "b0", "a1", "a2")] == [1, 2, 3, 4]
        dispatcher = ThreadDispatcher(store, lambda: PlainBackend(lambda *_: None, "fake"), workers=2)
        dispatcher.start()
        try:
            wait_until(lambda: len(started) == 2, 20, "two gradings under way")
            assert sorted(started) == ["a0", "b0"]
            gates["b0"].set()
            wait_until(lambda: store.scorecard(ids["b0"]) is not None, 20, "Bob's graded")
            time.sleep(1.0)  # a free thread, and only Alice waits: it still does not take her second
            assert len(started) == 2 and jobs.status(store, ids["a1"]).state == "queued"
            assert jobs.status(store, ids["a1"]).place == 1
            gates["a0"].set()
            wait_until(lambda: len(started) == 3, 20, "Alice's second under way once her first is done")
            assert started[2] == "a1"
            gates["a1"].set()
            gates["a2"].set()
            wait_until(lambda: all(jobs.status(store, i).state == "graded" for i in ids.values()), 20,
                       "every submission graded")
        finally:
            for gate in gates.values():
                gate.set()
            dispatcher.stop()
        assert sorted(started) == sorted(ids) and {len(store.scorecards(i)) for i in ids.values()} == {1}


def test_concurrent_claims_never_give_one_student_more_than_their_share(location):
    """Graders claiming at the same moment (threads here; machines in production) each see the queue
    before the others' claims land: the student's row is what serialises them."""
    from grader.service import jobs

    with Store(location) as store:
        for n in range(6):
            jobs.submit(store, "alice", EXERCISE, "free", "scheduler.py", f"a{n}".encode())
        start = threading.Barrier(6)

        def claim_one() -> int | None:
            start.wait()
            taken = jobs.claim_next(store, lease_s=60, share=1)
            return taken[0] if taken else None

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            claimed = [c for c in pool.map(lambda _: claim_one(), range(6)) if c is not None]
        assert len(claimed) == 1
        assert [s.state for s in store.submissions(EXERCISE, "alice")].count("grading") == 1
        # Without a share (the broker's graders), each takes one: none is taken twice.
        more = [jobs.claim_next(store, lease_s=60) for _ in range(6)]
        assert len({m[0] for m in more if m}) == 5 and more[-1] is None


@pytest.mark.unit
def test_a_postgres_url_in_either_spelling_reaches_psycopg_and_a_malformed_one_is_named():
    from grader.db.engine import make_engine, sqlite_path

    for url in ("postgres://grader@127.0.0.1:9/course", "postgresql://grader@127.0.0.1:9/course"):
        engine = make_engine(url)  # connects lazily: nothing listens there, and nothing is asked yet
        assert engine.url.drivername == "postgresql+psycopg" and engine.url.database == "course"
        engine.dispose()
    with pytest.raises(StoreError, match="not a database URL"):
        sqlite_path("://nowhere")


def test_adjustments_made_on_submissions_are_kept_as_the_students_grade_of_the_exercise(location):
    """Migration 0009: an adjustment belonged to one submission; it becomes the student's for the exercise
    (the submission it was made on kept beside it), every row of the history kept."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import select

    from grader.course.store import MIGRATIONS_FOLDER
    from grader.db import schema
    from grader.db.engine import make_engine

    engine = make_engine(location)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_FOLDER))
    with engine.connect() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0006")
        connection.commit()
        rows = [("ada", "sum", "a"), ("ada", "sum", "b"), ("bob", "sum", "c")]
        for number, (student, exercise, sha) in enumerate(rows, 1):
            connection.exec_driver_sql(f"INSERT INTO students (id, created_at) SELECT '{student}', 'x' WHERE NOT "
                                       f"EXISTS (SELECT 1 FROM students WHERE id = '{student}')")
            connection.exec_driver_sql(
                "INSERT INTO submissions (id, student_id, exercise, tier, sha256, filename, content, submitted_at) "
                f"VALUES ({number}, '{student}', '{exercise}', 'free', '{sha * 64}', 'f.py', '', '2026-01-0{number}')")
        for sid, points, comment in ((1, 3.0, "waiver"), (3, -1.0, "copied a line"), (1, 0.0, ""), (2, 2.5, "again")):
            connection.exec_driver_sql("INSERT INTO adjustments (submission_id, points, comment, made_by, made_at) "
                                       f"VALUES ({sid}, {points}, '{comment}', 'instructor', '2026-02-0{sid}')")
        connection.commit()
    engine.dispose()
    with Store(location) as store:
        assert store.version == SCHEMA_VERSION
        with store.reading() as db:
            a = schema.adjustments
            kept = db.execute(select(a.c.submission_id, a.c.student_id, a.c.exercise, a.c.points)
                              .order_by(a.c.id)).all()
        assert [tuple(row) for row in kept] == [(1, "ada", "sum", 3.0), (3, "bob", "sum", -1.0),
                                                (1, "ada", "sum", 0.0), (2, "ada", "sum", 2.5)]
        standing = store.adjustments()
        assert set(standing) == {("ada", "sum"), ("bob", "sum")}
        assert (standing["ada", "sum"].points, standing["ada", "sum"].submission_id) == (2.5, 2)
        assert standing["bob", "sum"].comment == "copied a line"
        # An adjustment made now holds for the student's grade, whichever submission counts.
        store.adjust(1, 4.0, "regrade request", "instructor")
        assert store.adjustments()["ada", "sum"].points == 4.0
