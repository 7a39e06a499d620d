"""The submissions store: students, submissions and their scorecards, in SQLite or PostgreSQL.

`Store(path)` opens (or creates) an SQLite file; `Store("postgresql://...")` a shared PostgreSQL
database, with the same schema. Every write is a transaction, so a crash or Ctrl-C in the middle of a
batch keeps everything graded before it and leaves no half-written row. The schema is built and
upgraded by Alembic migrations (`grader/db/migrations/versions/`), each in its own transaction; a
store made by a newer grader is refused. An SQLite store made before the migrations moved to Alembic
(its version in `PRAGMA user_version`) is recognised and upgraded in place.

The SQLite file (and SQLite's -wal and -shm files beside it) is created readable by its owner only:
it holds every student's code and results.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection, Subquery, and_, delete, func, insert, select, text, update
from sqlalchemy.exc import DatabaseError, IntegrityError

from grader.core.scorecard import Scorecard
from grader.core.scorecard import utc_now as now
from grader.course.student_ids import STUDENT_ID, validate_student_id
from grader.db import schema
from grader.db.engine import is_url, make_engine, migration_lock, sqlite_path
from grader.errors import StoreError

__all__ = ["STUDENT_ID", "validate_student_id"]  # where the course's other modules look for them

DEFAULT_DB = "grader.db"
MIGRATIONS_FOLDER = Path(__file__).resolve().parents[1] / "db" / "migrations"
# The newest migration's number (not how many there are: migrations made on branches side by side are
# numbered apart and chained when they meet, so the numbers may skip).
SCHEMA_VERSION = max(int(p.name[:4]) for p in (MIGRATIONS_FOLDER / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))


# Whether a file will be rejected by its grading, before any test runs (grader.core.validate's checks).
Refused = Callable[[bytes], bool]


class TooSoon(Exception):
    """A submission that came before the interval since the student's last one had passed."""

    def __init__(self, ready: datetime) -> None:
        super().__init__(f"the next submission is possible at {ready.isoformat(timespec='seconds')}")
        self.ready = ready


def store_files_path(location: str | Path) -> Path:
    """Where files that belong with a store go (stored reports, the spool): beside an SQLite file (its path),
    in the current folder for a database server."""
    file = sqlite_path(location)
    return file if file is not None else Path.cwd() / "grader-store"


def default_db_path(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("GRADER_DB") or DEFAULT_DB)


@dataclass(frozen=True)
class StoredSubmission:
    id: int
    student: str
    exercise: str
    tier: str
    sha256: str
    filename: str
    submitted_at: str
    card: Scorecard | None
    state: str = "graded"


@dataclass(frozen=True)
class TermChange:
    """A term of an exercise as set in the dashboard: its value (JSON), who set it and when."""
    value: object
    by: str
    at: str


@dataclass(frozen=True)
class Adjustment:
    """Points an instructor added to a student's grade of an exercise (negative: took off), and why; it
    holds for whichever of their submissions counts. `submission_id`: the one it was made on."""
    points: float
    comment: str
    by: str
    at: str
    submission_id: int | None = None


def _card(raw: str | None) -> Scorecard | None:
    return Scorecard.from_dict(json.loads(raw)) if raw else None


def newest_scorecards() -> Subquery:
    """A subquery: the id of each submission's newest scorecard (its current one)."""
    return (select(schema.scorecards.c.submission_id, func.max(schema.scorecards.c.id).label("card_id"))
            .group_by(schema.scorecards.c.submission_id).subquery())


class Store:
    def __init__(self, location: str | Path) -> None:
        self.location = str(location)
        self.path = store_files_path(self.location)
        self.is_sqlite = sqlite_path(location) is not None
        try:
            self.engine = make_engine(location)
        except DatabaseError as exc:
            raise StoreError(f"{self.describe()}: not a usable grader store ({exc.orig})") from None
        try:
            self.migrate()
        except DatabaseError as exc:
            self.close()
            raise StoreError(f"{self.describe()}: not a usable grader store ({exc.orig})") from None
        except BaseException:
            # A store refused (newer than this grader, say) is handed to no one: its connections close
            # now, not whenever the collector finds them.
            self.close()
            raise

    def describe(self) -> str:
        """The store's location for messages, without a password."""
        if not is_url(self.location):
            return self.location
        return self.engine.url.render_as_string(hide_password=True) if hasattr(self, "engine") else "the database"

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One write transaction: all of it lands, or (on any error, Ctrl-C included) none of it."""
        with self.engine.connect() as connection:
            connection = connection.execution_options(write=True)
            with connection.begin():
                yield connection

    @contextlib.contextmanager
    def reading(self) -> Iterator[Connection]:
        with self.engine.connect() as connection, connection.begin():
            yield connection

    # -- the schema ------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        with self.engine.connect() as connection:
            return self._revision(connection)

    @staticmethod
    def _revision(connection: Connection) -> int:
        from alembic.runtime.migration import MigrationContext

        current = MigrationContext.configure(connection).get_current_revision()
        return int(current) if current and current.isdigit() else 0

    def migrate(self) -> None:
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_FOLDER))
        with self.engine.connect() as connection, migration_lock(connection):
            legacy = 0
            if self.is_sqlite:
                legacy = int(connection.exec_driver_sql("PRAGMA user_version").scalar() or 0)
                connection.commit()
                if legacy > SCHEMA_VERSION:
                    raise StoreError(f"{self.describe()} has schema version {legacy}, newer than this grader's "
                                     f"{SCHEMA_VERSION}; upgrade grader")
            current = self._revision(connection)
            connection.commit()
            if current > SCHEMA_VERSION or (current == 0 and legacy == 0 and self._has_unknown_revision(connection)):
                raise StoreError(f"{self.describe()} has a schema newer than this grader's {SCHEMA_VERSION}; "
                                 "upgrade grader")
            config.attributes["connection"] = connection
            if current == 0 and legacy:  # made by a grader that counted versions in PRAGMA user_version
                command.stamp(config, f"{legacy:04d}")
                connection.commit()
            if current < SCHEMA_VERSION:
                command.upgrade(config, "head")
                connection.commit()
            if self.is_sqlite:
                connection.exec_driver_sql(f"PRAGMA user_version = {SCHEMA_VERSION}")
                connection.commit()

    @staticmethod
    def _has_unknown_revision(connection: Connection) -> bool:
        from sqlalchemy import inspect

        if not inspect(connection).has_table("alembic_version"):
            return False
        rows = connection.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
        connection.commit()
        return any(not str(r[0]).isdigit() for r in rows)

    # -- writing ---------------------------------------------------------------------------------
    def ensure_student(self, db: Connection, student: str) -> None:
        st = schema.students
        exists = db.execute(select(st.c.id).where(st.c.id == student)).first()
        if exists is None:
            # `erin` and `Erin` would be one student to a spreadsheet and to a case-insensitive file system
            # (their published pages would overwrite each other): one spelling per student.
            # Compared casefolded here, not with SQL's lower(), which SQLite applies to ASCII letters only.
            key = student.casefold()
            spellings = [known for known in db.execute(select(st.c.id)).scalars() if known.casefold() == key]
            if student in spellings:
                return  # added meanwhile by a concurrent transaction (PostgreSQL reads what it committed)
            if spellings:
                raise StoreError(f"student id {student!r} differs from {spellings[0]!r} only in case: use one spelling")
            db.execute(insert(st).values(id=student, created_at=now()))

    def add_submission(self, student: str, exercise: str, tier: str, sha256: str, filename: str,
                       content: bytes, state: str = "stored", submitted_at: str | None = None,
                       interval_s: float | None = None, queued_at: float | None = None,
                       refused: Refused | None = None) -> tuple[int, bool]:
        """(submission id, whether it is to be graded). The same content again is the same submission,
        handed in again: its `submitted_at` moves to this moment, so the latest file a student handed
        in is their latest submission. `submitted_at`: when it came in, if not now (a batch stores a
        file once it is graded).

        With `interval_s` (the web service): a student's submissions are taken one at a time, one that
        comes less than `interval_s` after their last to the exercise is refused (`TooSoon`), and the
        same content whose current result is an `error` (no result the grader vouches for) is taken
        again: its state becomes `state` and its `submitted_at` this moment. `refused` tells the files
        its grading will reject (they run no test): a rejected file does not use up the interval, so the
        student's next file is checked against their last one that is not rejected, and rejected files
        are checked against the last rejected one (they are spaced among themselves, so sending them
        cannot fill the store). A submission whose card says `rejected` is rejected, `refused` or not.

        `queued_at` (the service's queue): the row is written with its place in the queue, in the same
        transaction, so no crash leaves a queued submission that nothing would send again."""
        student = validate_student_id(student)
        s = schema.submissions
        moment = submitted_at or now()
        # Checked before the transaction, which holds the student's row (and SQLite's write lock).
        rejected = interval_s is not None and refused is not None and refused(content)
        for attempt in range(2):  # a concurrent insert of the same row is found on the second look
            try:
                with self.transaction() as db:
                    self.ensure_student(db, student)
                    if interval_s is not None:
                        # The check and the insert in one transaction that holds the student's row (SQLite
                        # takes its write lock at BEGIN): requests sent at once cannot all pass the check.
                        db.execute(select(schema.students.c.id).where(schema.students.c.id == student)
                                   .with_for_update())
                    row = db.execute(select(s.c.id).where(and_(
                        s.c.student_id == student, s.c.exercise == exercise, s.c.tier == tier,
                        s.c.sha256 == sha256))).first()
                    again = row is not None and interval_s is not None and self._current_status(db, row.id) == "error"
                    if row is not None and not again:
                        # Handed in again: it is the student's latest submission from now on.
                        db.execute(update(s).where(and_(s.c.id == row.id, s.c.submitted_at < moment))
                                   .values(submitted_at=moment))
                        return int(row.id), False
                    if interval_s is not None:
                        self._check_interval(db, student, exercise, moment, interval_s, rejected, refused)
                    queue = {"queued_at": queued_at, "attempts": 0} if queued_at is not None else {}
                    if again and row is not None:
                        db.execute(update(s).where(s.c.id == row.id).values(state=state, submitted_at=moment, **queue))
                        return int(row.id), True
                    new_id = db.execute(insert(s).values(
                        student_id=student, exercise=exercise, tier=tier, sha256=sha256, filename=filename,
                        content=content, submitted_at=moment, state=state, **queue)).inserted_primary_key
                    assert new_id is not None  # an insert always has its key
                    new_id = new_id[0]
                    return int(new_id), True
            except IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def _current_status(db: Connection, submission_id: int) -> str | None:
        c = schema.scorecards
        return db.execute(select(c.c.status).where(c.c.submission_id == submission_id)
                          .order_by(c.c.id.desc()).limit(1)).scalar()

    @staticmethod
    def _check_interval(db: Connection, student: str, exercise: str, moment: str, interval_s: float,
                        rejected: bool, refused: Refused | None) -> None:
        """TooSoon when the student's last submission to the exercise of the same kind as this one
        (rejected or not: see `add_submission`) came less than `interval_s` before `moment`."""
        s, c, newest = schema.submissions, schema.scorecards, newest_scorecards()
        earlier = db.execute(select(s.c.id, s.c.submitted_at, c.c.status)
                             .select_from(s.outerjoin(newest, newest.c.submission_id == s.c.id)
                                          .outerjoin(c, c.c.id == newest.c.card_id))
                             .where(and_(s.c.student_id == student, s.c.exercise == exercise))
                             .order_by(s.c.submitted_at.desc(), s.c.id.desc())).all()
        for row_id, submitted_at, status in earlier:  # the newest first: the first of the same kind is the last
            if status is None and refused is not None:
                # Not graded yet: its grading will say what the check says now.
                content = db.execute(select(s.c.content).where(s.c.id == row_id)).scalar()
                was_rejected = content is not None and refused(content)
            else:
                was_rejected = status == "rejected"
            if was_rejected == rejected:
                ready = datetime.fromisoformat(submitted_at) + timedelta(seconds=interval_s)
                if datetime.fromisoformat(moment) < ready:
                    raise TooSoon(ready)
                return

    def save_scorecard(self, submission_id: int, card: Scorecard) -> None:
        """Add a scorecard to the submission; it becomes the current one (earlier ones are kept)."""
        with self.transaction() as db:
            self.insert_scorecard(db, submission_id, card)

    @staticmethod
    def insert_scorecard(db: Connection, submission_id: int, card: Scorecard) -> None:
        db.execute(insert(schema.scorecards).values(
            submission_id=submission_id, status=card.status, score=card.score, max_score=card.max_score,
            scorecard=card.to_json(compact=True), graded_at=now()))
        db.execute(update(schema.submissions).where(schema.submissions.c.id == submission_id)
                   .values(state="graded", claim=None, lease_until=None))

    # -- reading ---------------------------------------------------------------------------------
    def scorecard(self, submission_id: int) -> Scorecard | None:
        """The current (newest) scorecard of a submission."""
        c = schema.scorecards
        with self.reading() as db:
            raw = db.execute(select(c.c.scorecard).where(c.c.submission_id == submission_id)
                             .order_by(c.c.id.desc()).limit(1)).scalar()
        return _card(raw)

    def scorecards(self, submission_id: int) -> list[Scorecard]:
        """Every scorecard of a submission, oldest first."""
        c = schema.scorecards
        with self.reading() as db:
            rows = db.execute(select(c.c.scorecard).where(c.c.submission_id == submission_id).order_by(c.c.id))
            return [card for (raw,) in rows if (card := _card(raw)) is not None]

    def submissions(self, exercise: str | None = None, student: str | None = None,
                    ids: list[int] | None = None) -> list[StoredSubmission]:
        s, c, newest = schema.submissions, schema.scorecards, newest_scorecards()
        query = (select(s.c.id, s.c.student_id, s.c.exercise, s.c.tier, s.c.sha256, s.c.filename,
                        s.c.submitted_at, c.c.scorecard, s.c.state)
                 .select_from(s.outerjoin(newest, newest.c.submission_id == s.c.id)
                              .outerjoin(c, c.c.id == newest.c.card_id)))
        if exercise:
            query = query.where(s.c.exercise == exercise)
        if student:
            query = query.where(s.c.student_id == student)
        if ids is not None:
            query = query.where(s.c.id.in_(ids))
        with self.reading() as db:
            # In the order they were handed in (a file handed in again moves to its new place).
            rows = db.execute(query.order_by(s.c.submitted_at, s.c.id)).all()
        return [StoredSubmission(r[0], r[1], r[2], r[3], r[4], r[5], r[6], _card(r[7]), r[8]) for r in rows]

    def student_names(self) -> dict[str, str]:
        """{student id: name} for the students the store knows a name of (a roster gives names)."""
        with self.reading() as db:
            rows = db.execute(select(schema.students.c.id, schema.students.c.name)).all()
        return {student: name for student, name in rows if name}

    def extensions(self) -> dict[tuple[str, str], datetime]:
        """{(student, exercise): the student's own due date}."""
        e = schema.extensions
        with self.reading() as db:
            rows = db.execute(select(e.c.student_id, e.c.exercise, e.c.due)).all()
        return {(student, exercise): datetime.fromisoformat(due) for student, exercise, due in rows}

    def set_extension(self, student: str, exercise: str, due: datetime | None) -> None:
        """Give the student their own due date for the exercise, or (None) take it back."""
        e = schema.extensions
        with self.transaction() as db:
            db.execute(delete(e).where(and_(e.c.student_id == student, e.c.exercise == exercise)))
            if due is not None:
                db.execute(insert(e).values(student_id=student, exercise=exercise, due=due.isoformat(),
                                            granted_at=now()))

    def exercise_terms(self) -> dict[str, dict[str, TermChange]]:
        """{exercise: {key: its newest change in the dashboard}} (keys never changed there are left out)."""
        t = schema.exercise_terms
        with self.reading() as db:
            rows = db.execute(select(t.c.exercise, t.c.key, t.c.value, t.c.changed_by, t.c.changed_at)
                              .order_by(t.c.id)).all()
        found: dict[str, dict[str, TermChange]] = {}
        for exercise, key, value, by, at in rows:
            found.setdefault(exercise, {})[key] = TermChange(json.loads(value), by, at)
        return found

    def exercise_term_history(self, exercise: str) -> list[tuple[str, TermChange]]:
        """Every change of the exercise's terms made in the dashboard, the newest first: (key, change)."""
        t = schema.exercise_terms
        with self.reading() as db:
            rows = db.execute(select(t.c.key, t.c.value, t.c.changed_by, t.c.changed_at)
                              .where(t.c.exercise == exercise).order_by(t.c.id.desc())).all()
        return [(key, TermChange(json.loads(value), by, at)) for key, value, by, at in rows]

    def set_exercise_terms(self, exercise: str, changes: dict[str, object], by: str) -> None:
        """Record these terms of the exercise (JSON values; None takes a key back to exercise.toml's), as
        changed by `by` now, in one transaction. A value equal to the one in force is not recorded again."""
        t = schema.exercise_terms
        current = self.exercise_terms().get(exercise, {})
        moment = now()
        with self.transaction() as db:
            for key, value in changes.items():
                if key in current and current[key].value == value:
                    continue
                db.execute(insert(t).values(exercise=exercise, key=key, value=json.dumps(value), changed_by=by,
                                            changed_at=moment))

    def adjustments(self) -> dict[tuple[str, str], Adjustment]:
        """{(student, exercise): the adjustment in force} (one taken back to 0 points with no comment is none)."""
        a = schema.adjustments
        with self.reading() as db:
            rows = db.execute(select(a.c.student_id, a.c.exercise, a.c.points, a.c.comment, a.c.made_by,
                                     a.c.made_at, a.c.submission_id).order_by(a.c.id)).all()
        found = {(row.student_id, row.exercise): Adjustment(row.points, row.comment, row.made_by, row.made_at,
                                                            row.submission_id) for row in rows}
        return {key: adj for key, adj in found.items() if adj.points or adj.comment}

    def prediction_results(self) -> dict[tuple[str, str], bool]:
        """{(student, exercise): whether their answer to the question before the editor was right}."""
        pr = schema.predictions
        with self.reading() as db:
            return {(row.student_id, row.exercise): bool(row.correct)
                    for row in db.execute(select(pr.c.student_id, pr.c.exercise, pr.c.correct))}

    def adjust(self, submission_id: int, points: float, comment: str, by: str) -> None:
        """Set the points added to (negative: taken from) the grade of the submission's student for its
        exercise, and why: it holds for every submission of theirs to it, this one and those to come."""
        s = schema.submissions
        with self.transaction() as db:
            found = db.execute(select(s.c.student_id, s.c.exercise).where(s.c.id == submission_id)).first()
            if found is None:
                raise StoreError(f"there is no submission {submission_id} to adjust")
            db.execute(insert(schema.adjustments).values(submission_id=submission_id, student_id=found.student_id,
                                                         exercise=found.exercise, points=points, comment=comment,
                                                         made_by=by, made_at=now()))

    def submission(self, submission_id: int) -> StoredSubmission | None:
        found = self.submissions(ids=[submission_id])
        return found[0] if found else None

    def content(self, submission_id: int) -> bytes | None:
        with self.reading() as db:
            return db.execute(select(schema.submissions.c.content)
                              .where(schema.submissions.c.id == submission_id)).scalar()

    def setting(self, key: str) -> str:
        with self.reading() as db:
            value = db.execute(select(schema.settings.c.value).where(schema.settings.c.key == key)).scalar()
        if value is None:
            raise StoreError(f"{self.describe()}: setting {key!r} is missing")
        return str(value)

    def ping(self) -> None:
        with self.reading() as db:
            db.execute(text("SELECT 1"))
