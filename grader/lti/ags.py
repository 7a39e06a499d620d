"""Assignment and Grade Services: each student's standing score sent to the line item of their course.

A sync round compares every (line item, LMS user)'s standing score with the last one queued for it and,
when it changed, queues the new one in the outbox (a store table); delivery sends what is due and keeps
what fails, with its error, for a later try (back-off doubling up to an hour). Nothing is lost to a
platform that is down: the row stays pending until the platform takes it. The dashboard shows the rows
not sent yet. The grading code knows nothing of this: `grader serve` runs the rounds in a thread
(ScoreSync), the way a periodic job would.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import and_, func, insert, select, update

from grader.core.exercise import Exercise
from grader.course.deadlines import Deadlines
from grader.course.gradebook import entry_of, final_score, pick, worth
from grader.course.store import Store
from grader.db import schema
from grader.lti.lineitems import ensure_maximum
from grader.lti.services import SCORE_SCOPE, ServiceError, call, registered

log = logging.getLogger("grader.lti")

# The submission that stands for a student is their latest graded one (rejected files never count over a
# judged one: see gradebook.pick), its grade after the late policy and an instructor's adjustment.
POLICY = "latest"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
FIRST_RETRY_S = 30.0
LAST_RETRY_S = 3600.0
ROUND_S = 20.0
FULL_ROUND_S = 600.0
# An outbox row's max_score when it takes a score back (its results withheld again after a release): no
# exercise is worth a negative number of points, so it is never a score's.
WITHHELD = -1.0


def may_send(deadlines: Deadlines, student: str, exercise: str, now: datetime) -> bool:
    """Whether a student's score of `exercise` may go to the LMS at `now`: once its results are released
    to them (the exercise's `release` term; after their own due date for `after_due`), as their own pages
    show it. A score the student cannot see yet never reaches a gradebook they can read."""
    terms = deadlines.terms.get(exercise)
    if terms is None:
        return True
    if terms.release == "after_due":
        terms = dataclasses.replace(terms, due=deadlines.due_for(student, exercise))
    return terms.released(now)


def score_message(sub: str, score: float, max_score: float, created_at: str, comment: str = "") -> dict[str, object]:
    """The AGS score of an outbox row, with the adjustment's note as its comment. A withheld one carries no
    score: AGS has the platform clear the grade it holds (`gradingProgress: Pending`, the activity
    submitted and its grading not done)."""
    if max_score == WITHHELD:
        return {"userId": sub, "activityProgress": "Submitted", "gradingProgress": "Pending",
                "timestamp": created_at}
    return {"userId": sub, "scoreGiven": score, "scoreMaximum": max_score, "activityProgress": "Completed",
            "gradingProgress": "FullyGraded", "timestamp": created_at, **({"comment": comment} if comment else {})}


def scores_url(lineitem: str) -> str:
    """`<lineitem>/scores`, the line item's query (some platforms put one on it) kept after the path."""
    parts = urlsplit(lineitem)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


def backoff(attempts: int) -> float:
    doubling: int = 2 ** max(0, attempts - 1)
    return min(LAST_RETRY_S, FIRST_RETRY_S * doubling)


def timestamp(moment: datetime) -> str:
    # AGS wants sub-second precision: a platform keeps a score only if it is newer than the one it has.
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class Target:
    platform_id: int
    lineitem: str
    sub: str
    student: str
    exercise: str


def targets(store: Store) -> list[Target]:
    """Every (line item, student) pair a score may go to: the course's members who are roster students."""
    li, me, us = schema.lti_line_items, schema.lti_members, schema.lti_users
    query = (select(li.c.platform_id, li.c.lineitem, us.c.sub, us.c.student_id, li.c.exercise)
             .select_from(li.join(me, and_(me.c.platform_id == li.c.platform_id, me.c.context_id == li.c.context_id))
                          .join(us, and_(us.c.platform_id == me.c.platform_id, us.c.sub == me.c.sub)))
             .where(us.c.student_id.is_not(None)))
    with store.reading() as db:
        return [Target(*row) for row in db.execute(query)]


def queue_scores(store: Store, exercises: Mapping[str, Exercise], moment: datetime | None = None) -> int:
    """Queue the standing scores that changed since the last queued; how many were queued."""
    moment = moment or datetime.now(timezone.utc)
    wanted = targets(store)
    if not wanted:
        return 0
    deadlines = Deadlines.of(exercises.values(), store)
    adjustments = store.adjustments()
    graded = [s for slug in sorted({t.exercise for t in wanted}) for s in store.submissions(slug) if s.card is not None]
    chosen = pick(graded, POLICY, deadlines.is_late, worth=lambda sub: worth(sub, deadlines, adjustments))
    ob = schema.lti_outbox
    queued = 0
    for target in wanted:
        counted = chosen.get((target.student, target.exercise))
        if counted is None or counted.card is None:
            continue
        if may_send(deadlines, target.student, target.exercise, moment):
            entry = entry_of(target.student, counted, deadlines=deadlines, adjustments=adjustments)
            score = final_score(entry.card, entry.deduction, entry.adjustment)
            if score is None:  # an error: the grader vouches for no score, and sends none
                continue
            given, maximum = float(score), float(entry.card.exercise_max_score)
            # The adjustment's note travels with the score: the LMS shows it as the score's comment.
            comment = " ".join(entry.adjustment_comment.split())
        else:
            # Withheld (again): a score queued or sent before is taken back; none queued, nothing to say.
            given, maximum, comment = 0.0, WITHHELD, ""
        key = and_(ob.c.platform_id == target.platform_id, ob.c.lineitem == target.lineitem, ob.c.sub == target.sub)
        with store.transaction() as db:
            last = db.execute(select(ob.c.id, ob.c.score, ob.c.max_score, ob.c.state, ob.c.comment).where(key)
                              .order_by(ob.c.id.desc()).limit(1)).first()
            if last is None and maximum == WITHHELD:
                continue
            if last is not None and (last.score, last.max_score, last.comment) == (given, maximum, comment):
                continue
            values = {"score": given, "max_score": maximum, "comment": comment, "created_at": timestamp(moment)}
            if last is not None and last.state == "pending":  # not sent yet: the newer score replaces it
                db.execute(update(ob).where(ob.c.id == last.id).values(**values))
            else:
                db.execute(insert(ob).values(platform_id=target.platform_id, lineitem=target.lineitem,
                                             sub=target.sub, student_id=target.student, exercise=target.exercise,
                                             state="pending", attempts=0, next_try=0.0, last_error="", **values))
        queued += 1
    return queued


def deliver(store: Store, now: float | None = None) -> tuple[int, int]:
    """Send the pending scores that are due: (sent, failed). A platform that does not answer at all is
    not tried again in this round (its other scores would wait for the same timeout)."""
    moment = time.time() if now is None else now
    ob = schema.lti_outbox
    with store.reading() as db:
        due = db.execute(select(ob).where(and_(ob.c.state == "pending", ob.c.next_try <= moment))
                         .order_by(ob.c.id)).all()
    sent = failed = 0
    down: set[int] = set()
    for row in due:
        if row.platform_id in down:
            continue
        try:
            if row.max_score != WITHHELD:
                # The column first: its maximum follows the exercise's (a regrade may have changed it).
                ensure_maximum(store, row.platform_id, row.lineitem, row.max_score)
            call(store, registered(store, row.platform_id), [SCORE_SCOPE], "POST", scores_url(row.lineitem),
                 score_message(row.sub, row.score, row.max_score, row.created_at, row.comment),
                 content_type=SCORE_TYPE)
        except ServiceError as exc:
            failed += 1
            if exc.unreachable:
                down.add(row.platform_id)
            with store.transaction() as db:
                db.execute(update(ob).where(and_(ob.c.id == row.id, ob.c.created_at == row.created_at)).values(
                    attempts=row.attempts + 1, next_try=time.time() + backoff(row.attempts + 1),
                    last_error=str(exc)[:500]))
            log.warning("score of %s for %s not sent (attempt %d): %s", row.student_id, row.exercise,
                        row.attempts + 1, exc)
            continue
        with store.transaction() as db:
            # Sent as it was read: a newer score queued meanwhile (same row, another created_at) stays pending.
            db.execute(update(ob).where(and_(ob.c.id == row.id, ob.c.created_at == row.created_at))
                       .values(state="sent", sent_at=timestamp(datetime.now(timezone.utc)), last_error=""))
        sent += 1
    return sent, failed


def retry_now(store: Store) -> int:
    """Make every pending score due at once (the dashboard's button); how many."""
    ob = schema.lti_outbox
    with store.transaction() as db:
        return db.execute(update(ob).where(ob.c.state == "pending").values(next_try=0.0)).rowcount


@dataclass(frozen=True)
class Pending:
    student: str
    exercise: str
    score: float
    max_score: float
    attempts: int
    last_error: str
    next_try: float


def pending(store: Store) -> list[Pending]:
    ob = schema.lti_outbox
    with store.reading() as db:
        rows = db.execute(select(ob).where(ob.c.state == "pending").order_by(ob.c.id)).all()
    return [Pending(r.student_id, r.exercise, r.score, r.max_score, r.attempts, r.last_error, r.next_try)
            for r in rows]


def sent_count(store: Store) -> int:
    ob = schema.lti_outbox
    with store.reading() as db:
        return int(db.execute(select(func.count()).select_from(ob).where(ob.c.state == "sent")).scalar() or 0)


def sync_round(store: Store, exercises: Mapping[str, Exercise]) -> tuple[int, int]:
    queue_scores(store, exercises)
    return deliver(store)


def change_mark(store: Store) -> tuple[object, ...]:
    """What a standing score depends on, in a few numbers: a round queues scores only when they moved
    (a grading, an adjustment, a change of dates or policy, an extension, a new member or line item), so
    that an idle service does not read every scorecard every round."""
    tables = (schema.scorecards, schema.adjustments, schema.exercise_terms)
    with store.reading() as db:
        marks: list[object] = [db.execute(select(func.max(t.c.id))).scalar() for t in tables]
        for table in (schema.extensions, schema.lti_members, schema.lti_line_items, schema.lti_users):
            marks.append(db.execute(select(func.count()).select_from(table)).scalar())
        marks.append(db.execute(select(func.max(schema.extensions.c.granted_at))).scalar())
        marks.append(db.execute(select(func.max(schema.lti_line_items.c.updated_at))).scalar())
    return tuple(marks)


class ScoreSync:
    """The thread of `grader serve` that queues changed scores and sends them, every `interval_s`."""

    def __init__(self, store: Store, exercises: Mapping[str, Exercise], interval_s: float = ROUND_S) -> None:
        self.store, self.exercises, self.interval_s = store, exercises, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.run, name="lti-scores", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def run(self) -> None:
        mark: tuple[object, ...] | None = None
        checked = 0.0
        while not self._stop.wait(self.interval_s):
            try:
                now, moment = change_mark(self.store), time.monotonic()
                # Every few minutes whatever the mark: may_send's answer may change with the time alone.
                if now != mark or moment - checked > FULL_ROUND_S:
                    queue_scores(self.store, self.exercises)
                    mark, checked = now, moment
                deliver(self.store)
            except Exception:  # the store away, a bug: logged, and the next round tries again
                log.exception("LTI score sync round failed")
