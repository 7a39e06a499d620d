"""The life of a submission in the service: stored and queued, claimed, graded, stored once.

The store is the truth. A submission is written (state `queued`) before anything is put on a queue;
a grader claims it with a random claim and a lease that it renews while it grades; its scorecard is
saved only if it still holds the claim when it finishes. A grader that dies lets its lease run out and
`recover` puts the submission back in the queue; a late result of that dead grader no longer holds the
claim and is dropped. So every submission ends with exactly one scorecard per grading asked for, however
many graders die, restart or receive the same job twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import and_, func, select, update

import grader
from grader.audit.match import diagnose_graded
from grader.core.backend import Backend
from grader.core.exercise import Exercise, ExerciseError, load_exercise
from grader.core.grading import grade_bytes
from grader.core.scorecard import Scorecard, utc_now
from grader.course.store import Refused, Store
from grader.db import schema

log = logging.getLogger("grader.jobs")

DEFAULT_LEASE_S = 60.0
MAX_ATTEMPTS = 3  # gradings lost to dead graders before the submission gets an error scorecard


@dataclass(frozen=True)
class Queued:
    id: int
    state: str
    place: int | None  # 1 = next to be graded; None unless queued


def submit(store: Store, student: str, exercise: str, tier: str, filename: str, content: bytes,
           interval_s: float | None = 0.0, moment: datetime | None = None,
           refused: Refused | None = None) -> tuple[int, bool]:
    """Store a submission as queued (before any queue hears of it). (id, whether it is to be graded):
    the same content again is the same submission and is not queued twice, unless its result was an
    error. One that comes within `interval_s` of the student's last to the exercise raises
    `store.TooSoon`, however many are sent at once; a file that `refused` says its grading will reject
    does not use up the interval of the files that can be graded (see `Store.add_submission`). With
    `interval_s` None no interval applies at all (a submission kept while the store was away, stored
    with the `moment` it arrived, which may come before one stored since)."""
    sha = hashlib.sha256(content).hexdigest()
    submitted_at = (moment or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    return store.add_submission(student, exercise, tier, sha, filename, content, state="queued",
                                submitted_at=submitted_at, interval_s=interval_s, queued_at=time.time(),
                                refused=refused)


def requeue(store: Store, submission_ids: list[int]) -> list[int]:
    """Ask for a new grading of these submissions (a regrade); their scorecards so far are kept."""
    s = schema.submissions
    done = []
    with store.transaction() as db:
        for submission_id in submission_ids:
            changed = db.execute(update(s).where(and_(s.c.id == submission_id, s.c.state != "queued"))
                                 .values(state="queued", queued_at=time.time(), claim=None, lease_until=None,
                                         attempts=0))
            if changed.rowcount == 1:
                done.append(submission_id)
    return done


def status(store: Store, submission_id: int) -> Queued | None:
    s = schema.submissions
    with store.reading() as db:
        row = db.execute(select(s.c.state).where(s.c.id == submission_id)).first()
        if row is None:
            return None
        place = None
        if row.state == "queued":
            line = db.execute(select(s.c.id, s.c.student_id, s.c.state, s.c.queued_at)
                              .where(s.c.state.in_(("queued", "grading")))).all()
            keys = line_keys(line)
            place = 1 + sum(1 for key in keys.values() if key < keys[submission_id])
    return Queued(submission_id, row.state, place)


STALL_AFTER_S = 120.0  # a queue that has waited this long with no grading under way or ended is stalled


def stalled_for(store: Store, now: float | None = None, after_s: float = STALL_AFTER_S) -> float | None:
    """Seconds since the graders last showed life, when the queue is stalled: something has waited over
    `after_s`, nothing is being graded and no grading ended in that time. None otherwise. From the
    store alone, so it holds whatever the queue is (threads, Redis and workers) and whatever broke."""
    now = time.time() if now is None else now
    s, c = schema.submissions, schema.scorecards
    with store.reading() as db:
        oldest: float | None = db.execute(select(func.min(s.c.queued_at)).where(s.c.state == "queued")).scalar()
        if oldest is None or now - oldest < after_s:
            return None
        if db.execute(select(func.count()).where(and_(s.c.state == "grading", s.c.lease_until > now))).scalar():
            return None
        last = db.execute(select(func.max(c.c.graded_at))).scalar()
    ended = datetime.fromisoformat(last).timestamp() if last else None
    if ended is not None and now - ended < after_s:
        return None
    return now - (oldest if ended is None else max(oldest, ended))


def line_keys(rows: Sequence[Any]) -> dict[int, tuple[int, float, int]]:
    """The order in which `claim_next` takes the queued submissions among `rows` (id, student_id,
    state, queued_at of every queued and grading one), as sort keys: a student's k-th waiting
    submission comes after everyone's (k-1)-th, counting their gradings under way, oldest first in a
    round. Exact while no grading ends; an estimate for the page that shows a student's place."""
    busy = Counter(r.student_id for r in rows if r.state == "grading")
    ahead: Counter[str] = Counter()
    keys = {}
    for r in sorted((r for r in rows if r.state == "queued"), key=lambda r: (r.queued_at or 0.0, r.id)):
        keys[r.id] = (busy[r.student_id] + ahead[r.student_id], r.queued_at or 0.0, r.id)
        ahead[r.student_id] += 1
    return keys


def queued_ids(store: Store) -> list[int]:
    s = schema.submissions
    with store.reading() as db:
        return [r[0] for r in db.execute(select(s.c.id).where(s.c.state == "queued")
                                         .order_by(s.c.queued_at, s.c.id))]


def claim(store: Store, submission_id: int, lease_s: float) -> str | None:
    """Take a queued submission for grading; None when it is not queued (graded already, or taken)."""
    token = secrets.token_hex(16)
    s = schema.submissions
    with store.transaction() as db:
        taken = db.execute(update(s).where(and_(s.c.id == submission_id, s.c.state == "queued"))
                           .values(state="grading", claim=token, lease_until=time.time() + lease_s))
    return token if taken.rowcount == 1 else None


def claim_next(store: Store, lease_s: float, share: int | None = None) -> tuple[int, str] | None:
    """Claim the submission to grade next: the oldest queued one of the student with the fewest
    gradings under way, so one student's many submissions wait behind everyone else's first.
    With `share`, a student with that many gradings under way is passed over even if a grader is
    idle, so one student never holds every grader. (id, claim), or None when nothing can be taken.

    The student's row is locked while their gradings are counted and the claim is written: graders
    claiming at the same moment (threads, or machines on PostgreSQL) are counted one after another."""
    s, students = schema.submissions, schema.students
    under_way = s.alias("under_way")
    busy = (select(under_way.c.student_id, func.count().label("n")).where(under_way.c.state == "grading")
            .group_by(under_way.c.student_id).subquery())
    n = func.coalesce(busy.c.n, 0)
    line = (select(s.c.id, s.c.student_id, n.label("busy"))
            .select_from(s.outerjoin(busy, busy.c.student_id == s.c.student_id)).where(s.c.state == "queued"))
    if share is not None:
        line = line.where(n < share)
    line = line.order_by(n, s.c.queued_at, s.c.id).limit(1)
    # Each turn that finds its pick taken, or its student busier than it saw, follows another grader's
    # claim or finish: the loop ends as soon as graders stop changing the queue under it.
    while True:
        with store.reading() as db:
            pick = db.execute(line).first()
        if pick is None:
            return None
        token = secrets.token_hex(16)
        with store.transaction() as db:
            db.execute(select(students.c.id).where(students.c.id == pick.student_id).with_for_update())
            now_busy = db.execute(select(func.count()).select_from(s).where(and_(
                s.c.student_id == pick.student_id, s.c.state == "grading"))).scalar() or 0
            if now_busy > pick.busy:
                continue  # another grader took one of theirs meanwhile: someone else may come first now
            taken = db.execute(update(s).where(and_(s.c.id == pick.id, s.c.state == "queued"))
                               .values(state="grading", claim=token, lease_until=time.time() + lease_s))
        if taken.rowcount == 1:
            return int(pick.id), token


def renew(store: Store, submission_id: int, token: str, lease_s: float) -> bool:
    s = schema.submissions
    with store.transaction() as db:
        kept = db.execute(update(s).where(and_(s.c.id == submission_id, s.c.claim == token))
                          .values(lease_until=time.time() + lease_s))
    return kept.rowcount == 1


def finish(store: Store, submission_id: int, token: str, card: Scorecard) -> bool:
    """Save the scorecard if this grader still holds the claim; False (nothing saved) otherwise."""
    s = schema.submissions
    with store.transaction() as db:
        held = db.execute(update(s).where(and_(s.c.id == submission_id, s.c.claim == token, s.c.state == "grading"))
                          .values(state="graded", claim=None, lease_until=None))
        if held.rowcount != 1:
            return False
        store.insert_scorecard(db, submission_id, card)
    return True


def error_card(store: Store, submission_id: int, reason: str) -> Scorecard:
    sub = store.submission(submission_id)
    assert sub is not None
    return Scorecard(exercise=sub.exercise, tier=sub.tier, submission_sha256=sub.sha256, status="error", score=0,
                     max_score=0, reason=reason, grader_version=grader.__version__,
                     graded_at=utc_now())


def recover(store: Store) -> list[int]:
    """Put back in the queue every submission whose grader's lease ran out (it died, or its machine
    did); one whose gradings died too often gets an error scorecard instead. Returns the ids requeued."""
    s = schema.submissions
    moment = time.time()
    back: list[int] = []
    with store.transaction() as db:
        # A queued row without its queue time (written by an older grader in two transactions, one of
        # which a crash cut off) takes its place in line now, and is sent again.
        placeless = db.execute(select(s.c.id).where(and_(s.c.state == "queued", s.c.queued_at.is_(None)))).scalars().all()
        if placeless:
            db.execute(update(s).where(and_(s.c.id.in_(placeless), s.c.queued_at.is_(None)))
                       .values(queued_at=moment, attempts=0))
            back.extend(placeless)
    with store.reading() as db:
        stale = db.execute(select(s.c.id, s.c.claim, s.c.attempts).where(and_(
            s.c.state == "grading", s.c.lease_until < moment))).all()
    for row in stale:
        if row.attempts + 1 >= MAX_ATTEMPTS:
            card = error_card(store, row.id, f"grading stopped {MAX_ATTEMPTS} times without a result "
                                             "(the grader running it died); submit again or ask your instructor")
            finish(store, row.id, row.claim, card)
            continue
        with store.transaction() as db:
            moved = db.execute(update(s).where(and_(s.c.id == row.id, s.c.claim == row.claim,
                                                    s.c.state == "grading"))
                               .values(state="queued", claim=None, lease_until=None, attempts=s.c.attempts + 1))
        if moved.rowcount == 1:
            back.append(row.id)
    return back


def numbers(ids: Sequence[int], most: int = 10) -> str:
    """`3`, `3 and 5`, `3, 5 and 8`, and `... and 4 more` past `most`."""
    shown = [str(i) for i in ids[:most]] + ([f"{len(ids) - most} more"] if len(ids) > most else [])
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def lost_gradings(store: Store, now: float | None = None) -> list[str]:
    """Plain sentences about gradings whose grader went silent (it died, or lost the store): claims whose
    lease ran out, not yet put back in the queue (the watchers do so within a third of a lease), and
    submissions back in the queue after losing a grader, until they are graded."""
    s = schema.submissions
    moment = time.time() if now is None else now
    with store.reading() as db:
        silent = db.execute(select(s.c.id, s.c.lease_until).where(and_(s.c.state == "grading",
                                                                      s.c.lease_until < moment))
                            .order_by(s.c.lease_until)).all()
        again = db.execute(select(s.c.id).where(and_(s.c.state == "queued", s.c.attempts > 0))
                           .order_by(s.c.id)).scalars().all()
    problems = []
    if len(silent) == 1:
        problems.append(f"The grader of submission {silent[0].id} has not renewed its claim, which ran out "
                        f"{moment - silent[0].lease_until:.0f} s ago: it died or cannot reach the store, and the "
                        "grading goes back to the queue.")
    elif silent:
        problems.append(f"The graders of submissions {numbers([r.id for r in silent])} have not renewed their claims, "
                        f"which ran out up to {moment - silent[0].lease_until:.0f} s ago: they died or cannot reach "
                        "the store, and the gradings go back to the queue.")
    if again:
        whose = (f"Submission {again[0]} lost its grader and waits" if len(again) == 1
                 else f"Submissions {numbers(list(again))} lost their graders and wait")
        problems.append(f"{whose} to be graded again (after {MAX_ATTEMPTS} lost gradings a submission gets an error "
                        "scorecard).")
    return problems


class Lease:
    """Renews a claim's lease from a thread while the grading runs."""

    def __init__(self, store: Store, submission_id: int, token: str, lease_s: float) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(store, submission_id, token, lease_s), daemon=True)
        self.thread.start()

    def run(self, store: Store, submission_id: int, token: str, lease_s: float) -> None:
        while not self.stop.wait(lease_s / 3):
            try:
                if not renew(store, submission_id, token, lease_s):
                    return
            except Exception:  # a store hiccup: try again at the next beat; the lease has margin
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def grade_submission(store: Store, submission_id: int, backend: Backend,
                     lease_s: float = DEFAULT_LEASE_S,
                     exercises: Callable[[str], Exercise] = load_exercise) -> bool:
    """Claim, grade and store one submission. False when another grader has it or it is done."""
    token = claim(store, submission_id, lease_s)
    if token is None:
        return False
    return grade_claimed(store, submission_id, token, backend, lease_s, exercises).stored


@dataclass(frozen=True)
class Ended:
    """How a grading that this grader claimed ended: its scorecard stored, or not and why."""
    submission_id: int
    stored: bool
    why_not: str = ""  # for a log: why nothing was stored

    def line(self, store: Store, seconds: float) -> str:
        """One line for a log, key=value so a log reader can take it apart: `graded submission=N
        outcome=S score=X/Y seconds=T` when the scorecard was stored, else `not stored submission=N
        seconds=T: why` (a late result dropped, or the submission given back)."""
        if self.stored:
            return f"graded {grading_line(store, self.submission_id, seconds)}"
        return f"not stored submission={self.submission_id} seconds={seconds:.2f}: {self.why_not}"


def grade_next(store: Store, backend: Backend, lease_s: float = DEFAULT_LEASE_S,
               share: int | None = None, exercises: Callable[[str], Exercise] = load_exercise) -> Ended | None:
    """Claim (`claim_next`), grade and store the submission whose turn it is; how it ended, or None
    when none can be taken now."""
    taken = claim_next(store, lease_s, share)
    if taken is None:
        return None
    return grade_claimed(store, *taken, backend, lease_s, exercises)


def grading_line(store: Store, submission_id: int, seconds: float) -> str:
    """One line of a finished grading for a log: `submission=N outcome=S score=X/Y seconds=T`, key=value
    so a log reader can take it apart."""
    card = store.scorecard(submission_id)
    outcome = f"outcome={card.status} score={card.score:g}/{card.max_score:g}" if card else "outcome=none"
    return f"submission={submission_id} {outcome} seconds={seconds:.2f}"


def release(store: Store, submission_id: int, token: str) -> bool:
    """Give a claimed submission back to the queue, in its place in line, for another grader."""
    s = schema.submissions
    with store.transaction() as db:
        moved = db.execute(update(s).where(and_(s.c.id == submission_id, s.c.claim == token, s.c.state == "grading"))
                           .values(state="queued", claim=None, lease_until=None))
    return moved.rowcount == 1


def why_dropped(store: Store, submission_id: int) -> str:
    """Why a finished grading's result was not stored: the grader no longer held its claim. Said from
    what the store shows now, for the grader's log."""
    s = schema.submissions
    with store.reading() as db:
        state = db.execute(select(s.c.state).where(s.c.id == submission_id)).scalar()
    lost = "this grader's claim ran out before it finished (its lease was not renewed in time)"
    if state == "graded":
        return f"result dropped: {lost}, and another grader's result was stored first"
    if state == "grading":
        return f"result dropped: {lost}, and another grader is grading the submission now"
    # A regrade also queues a submission again, whoever held it.
    return f"result dropped: the submission was queued again while it graded ({lost}, or a regrade asked for it)"


def grade_claimed(store: Store, submission_id: int, token: str, backend: Backend, lease_s: float,
                  exercises: Callable[[str], Exercise]) -> Ended:
    sub = store.submission(submission_id)
    assert sub is not None
    try:
        exercise = exercises(sub.exercise)
    except ExerciseError as exc:
        # This grader's project lacks the exercise (or has a broken copy): no fault of the student's. The
        # submission goes back in line for a grader that has it, and whoever runs this one is told why.
        log.warning("submission %s left queued: this grader cannot load exercise %r (%s)", submission_id,
                    sub.exercise, exc)
        release(store, submission_id, token)
        return Ended(submission_id, False, f"given back: this grader cannot load exercise {sub.exercise!r}")
    try:
        lease = Lease(store, submission_id, token, lease_s)
        try:
            content = store.content(submission_id)
            assert content is not None
            try:
                card = grade_bytes(content, exercise, sub.tier, backend, diagnose=diagnose_graded)
            except Exception as exc:  # fail closed: the grader could not vouch for a result
                card = error_card(store, submission_id, f"the grader could not grade this submission: {exc}")
        finally:
            lease.close()
        stored = finish(store, submission_id, token, card)
    except BaseException as stop:
        # Stopped in the middle (the worker's SIGTERM, Ctrl-C): the submission goes back in its place in
        # line now, not when the lease runs out. A store that cannot be reached leaves that to the lease.
        if not isinstance(stop, Exception):
            with contextlib.suppress(Exception):
                if release(store, submission_id, token):
                    log.warning("submission %s goes back to the queue: its grading was stopped before the end",
                                submission_id)
        raise
    return Ended(submission_id, True) if stored else Ended(submission_id, False, why_dropped(store, submission_id))


def queued_since(store: Store, before: float) -> list[int]:
    """Submissions queued before `before` (epoch seconds) and still waiting."""
    s = schema.submissions
    with store.reading() as db:
        return [r[0] for r in db.execute(select(s.c.id).where(and_(s.c.state == "queued", s.c.queued_at < before))
                                         .order_by(s.c.queued_at, s.c.id))]
