"""The submissions store: students, submissions and their scorecards in one SQLite file.

Every write is a transaction, so a crash or Ctrl-C in the middle of a batch keeps everything graded
before it and leaves no half-written row. The schema carries a version (`PRAGMA user_version`) and
upgrades itself through `MIGRATIONS`, in order, each in its own transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from grader.scorecard import Scorecard

DEFAULT_DB = "grader.db"
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")

MIGRATIONS: list[str] = [
    # 1: the first schema.
    """
    CREATE TABLE students (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL
    );
    CREATE TABLE submissions (
        id INTEGER PRIMARY KEY,
        student_id TEXT NOT NULL REFERENCES students(id),
        exercise TEXT NOT NULL,
        tier TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        filename TEXT NOT NULL,
        content BLOB NOT NULL,
        submitted_at TEXT NOT NULL,
        UNIQUE (student_id, exercise, tier, sha256)
    );
    CREATE TABLE scorecards (
        submission_id INTEGER PRIMARY KEY REFERENCES submissions(id),
        status TEXT NOT NULL,
        score INTEGER NOT NULL,
        max_score INTEGER NOT NULL,
        scorecard TEXT NOT NULL,
        graded_at TEXT NOT NULL
    );
    CREATE INDEX submissions_by_exercise ON submissions (exercise, student_id);
    """,
    # 2: a per-store secret for pseudonyms that stay stable from one publication to the next.
    """
    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO settings (key, value) VALUES ('pseudonym_key', lower(hex(randomblob(16))));
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class StoreError(Exception):
    """The store cannot be used as asked: a bad student id, a newer schema, a broken file."""


def validate_student_id(student: str) -> str:
    if not STUDENT_ID.match(student) or ".." in student:
        raise StoreError(f"invalid student id {student!r}: use 1-64 letters, digits, '.', '_', '@' or '-', "
                         "starting with a letter or digit")
    return student


def default_db_path(explicit: str | None = None) -> Path:
    return Path(explicit or os.environ.get("GRADER_DB") or DEFAULT_DB)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA foreign_keys = ON")
            self.migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable grader store ({exc})") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it lands, or (on any error, Ctrl-C included) none of it."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @property
    def version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def migrate(self) -> None:
        version = self.version
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {version}, newer than this grader's "
                             f"{SCHEMA_VERSION}; upgrade grader")
        for number in range(version, SCHEMA_VERSION):
            with self.transaction() as db:
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {number + 1}")

    # -- writing ---------------------------------------------------------------------------------
    def add_submission(self, student: str, exercise: str, tier: str, sha256: str, filename: str,
                       content: bytes) -> tuple[int, bool]:
        """(submission id, whether it is new). The same content again is the same submission."""
        validate_student_id(student)
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO students (id, created_at) VALUES (?, ?)", (student, now()))
            row = db.execute(
                "SELECT id FROM submissions WHERE student_id = ? AND exercise = ? AND tier = ? AND sha256 = ?",
                (student, exercise, tier, sha256)).fetchone()
            if row:
                return int(row[0]), False
            cursor = db.execute(
                "INSERT INTO submissions (student_id, exercise, tier, sha256, filename, content, submitted_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)", (student, exercise, tier, sha256, filename, content, now()))
            return int(cursor.lastrowid), True

    def save_scorecard(self, submission_id: int, card: Scorecard) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO scorecards (submission_id, status, score, max_score, scorecard, graded_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (submission_id, card.status, card.score, card.max_score, card.to_json(), now()))

    # -- reading ---------------------------------------------------------------------------------
    def scorecard(self, submission_id: int) -> Scorecard | None:
        row = self.db.execute("SELECT scorecard FROM scorecards WHERE submission_id = ?", (submission_id,)).fetchone()
        return Scorecard.from_dict(json.loads(row[0])) if row else None

    def submissions(self, exercise: str | None = None, student: str | None = None) -> list[StoredSubmission]:
        query = ("SELECT s.id, s.student_id, s.exercise, s.tier, s.sha256, s.filename, s.submitted_at, c.scorecard "
                 "FROM submissions s LEFT JOIN scorecards c ON c.submission_id = s.id WHERE 1 = 1")
        args: list[str] = []
        if exercise:
            query += " AND s.exercise = ?"
            args.append(exercise)
        if student:
            query += " AND s.student_id = ?"
            args.append(student)
        rows = self.db.execute(query + " ORDER BY s.id", args).fetchall()
        return [StoredSubmission(r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                                 Scorecard.from_dict(json.loads(r[7])) if r[7] else None) for r in rows]

    def setting(self, key: str) -> str:
        row = self.db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: setting {key!r} is missing")
        return str(row[0])
