"""A submission's way through the queue, on the store alone: its place, claims, leases, recovery."""

from __future__ import annotations

import time

import pytest

from grader.core.backend import PlainBackend
from grader.core.scorecard import Scorecard
from grader.course.store import Store
from grader.service import jobs
from tests.helpers import EXERCISE

pytestmark = pytest.mark.unit


def card(score: int) -> Scorecard:
    return Scorecard(exercise=EXERCISE, tier="free", submission_sha256="x", status="graded", score=score, max_score=10)


def test_a_queued_submission_knows_its_place_and_a_claim_takes_it_out_of_the_line(tmp_path):
    with Store(tmp_path / "s.db") as store:
        ids = [jobs.submit(store, f"s{n}", EXERCISE, "free", "scheduler.py", f"x = {n}\n".encode())[0]
               for n in range(3)]
        assert [jobs.status(store, i).place for i in ids] == [1, 2, 3]
        assert jobs.submit(store, "s0", EXERCISE, "free", "scheduler.py", b"x = 0\n") == (ids[0], False)
        token = jobs.claim(store, ids[0], lease_s=60)
        assert token and jobs.claim(store, ids[0], lease_s=60) is None  # one grader at a time
        assert jobs.status(store, ids[0]).state == "grading"
        assert [jobs.status(store, i).place for i in ids[1:]] == [1, 2]
        assert jobs.finish(store, ids[0], token, card(7))
        assert jobs.status(store, ids[0]).state == "graded" and store.scorecard(ids[0]).score == 7


def test_a_dead_graders_submission_is_requeued_and_its_late_result_dropped(tmp_path):
    with Store(tmp_path / "s.db") as store:
        (sid, _) = jobs.submit(store, "alice", EXERCISE, "free", "scheduler.py", b"x = 1\n")
        dead = jobs.claim(store, sid, lease_s=0.01)
        time.sleep(0.05)  # the lease runs out: its grader said nothing in time
        assert jobs.recover(store) == [sid] and jobs.status(store, sid).state == "queued"
        alive = jobs.claim(store, sid, lease_s=60)
        assert not jobs.finish(store, sid, dead, card(1))  # the dead grader's late result counts for nothing
        assert jobs.finish(store, sid, alive, card(9))
        assert [c.score for c in store.scorecards(sid)] == [9]


def test_a_submission_whose_gradings_keep_dying_ends_with_an_error_scorecard(tmp_path):
    with Store(tmp_path / "s.db") as store:
        (sid, _) = jobs.submit(store, "alice", EXERCISE, "free", "scheduler.py", b"x = 1\n")
        for _ in range(jobs.MAX_ATTEMPTS):
            assert jobs.claim(store, sid, lease_s=0.01)
            time.sleep(0.05)
            jobs.recover(store)
        (only,) = store.scorecards(sid)
        assert only.status == "error" and "stopped" in only.reason and jobs.status(store, sid).state == "graded"


def test_a_regrade_queues_again_and_keeps_the_earlier_scorecard(tmp_path):
    with Store(tmp_path / "s.db") as store:
        (sid, _) = jobs.submit(store, "alice", EXERCISE, "free", "scheduler.py", b"x = 1\n")
        assert jobs.finish(store, sid, jobs.claim(store, sid, 60), card(4))
        assert jobs.requeue(store, [sid]) == [sid] and jobs.requeue(store, [sid]) == []
        assert jobs.finish(store, sid, jobs.claim(store, sid, 60), card(10))
        assert [c.score for c in store.scorecards(sid)] == [4, 10] and store.scorecard(sid).score == 10


def test_a_submission_is_stored_with_its_place_in_the_queue_and_a_placeless_one_is_sent_again(tmp_path):
    """The queued row and its queue time are one write; a row an older grader left queued without its time
    (a crash between two transactions) takes its place in line at the next recovery, and is sent again."""
    from sqlalchemy import select, update

    from grader.db import schema

    s = schema.submissions
    with Store(tmp_path / "s.db") as store:
        (first, _) = jobs.submit(store, "alice", EXERCISE, "free", "scheduler.py", b"x = 1\n")
        with store.reading() as db:
            queued_at, attempts = db.execute(select(s.c.queued_at, s.c.attempts).where(s.c.id == first)).one()
        assert queued_at is not None and attempts == 0
        (stuck, _) = jobs.submit(store, "bob", EXERCISE, "free", "scheduler.py", b"x = 2\n")
        with store.transaction() as db:
            db.execute(update(s).where(s.c.id == stuck).values(queued_at=None))
        assert jobs.status(store, stuck).state == "queued"  # its page still reads, without a place in line
        assert jobs.recover(store) == [stuck]
        assert jobs.queued_ids(store) == [first, stuck] and jobs.status(store, stuck).place == 2
        assert jobs.recover(store) == []  # once placed, it is not sent again


def test_a_grader_without_the_exercise_leaves_the_submission_queued_for_another(tmp_path, caplog):
    from grader.core.exercise import ExerciseError

    def missing(slug: str):
        raise ExerciseError(f"no exercise named {slug!r} in /srv/worker/exercises")

    def never(*args):
        raise AssertionError("nothing may be graded without the exercise")

    with Store(tmp_path / "s.db") as store:
        (sid, _) = jobs.submit(store, "alice", EXERCISE, "free", "scheduler.py", b"x = 1\n")
        assert jobs.grade_submission(store, sid, PlainBackend(never, "local"), exercises=missing) is False
        assert jobs.status(store, sid).state == "queued" and jobs.status(store, sid).place == 1
        assert store.scorecards(sid) == [], "the student got a result for the grader's missing exercise"
        assert "cannot load exercise" in caplog.text and "/srv/worker" in caplog.text


def test_a_grading_stopped_in_the_middle_gives_its_submission_back_at_once(tmp_path, caplog):
    """A worker stopped by SIGTERM (or a Ctrl-C) abandons its grading: the submission is back in its place
    in line at once, with no lost grading counted, rather than when the lease runs out."""
    def stopped(*args):
        raise KeyboardInterrupt

    with Store(tmp_path / "s.db") as store:
        ids = [jobs.submit(store, f"s{n}", EXERCISE, "free", "scheduler.py", f"x = {n}\n".encode())[0]
               for n in range(2)]
        with pytest.raises(KeyboardInterrupt):
            jobs.grade_submission(store, ids[0], PlainBackend(stopped, "local"))
        assert jobs.status(store, ids[0]).state == "queued" and jobs.queued_ids(store) == ids
        assert jobs.lost_gradings(store) == [] and store.scorecards(ids[0]) == []
        assert f"submission {ids[0]} goes back to the queue: its grading was stopped before the end" in caplog.text


def test_both_watchers_say_the_store_is_away_in_one_line_a_beat(caplog):
    """The thread dispatcher's watcher and the queue's say it alike (`dispatch.store_away`): the driver's
    first line of why, not its whole report."""
    from sqlalchemy.exc import OperationalError

    from grader.service.dispatch import store_away

    away = OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused\nis the server running?"))
    with caplog.at_level("WARNING", logger="grader.service"):
        store_away(away, 20.0)
    assert caplog.messages == ["watching the queue: the store cannot be reached (connection refused); "
                               "trying again in 20 s"]
