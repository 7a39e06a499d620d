"""A store written by grader 0.11.0 is upgraded by this release, to whatever the newest migration is, with
nothing lost: every row of every table it had, each column it had, and the course read back through the
store as the web service reads it.

tests/upgrade/store-0.11.0.sql is that store (tests/course_content.py's course, made by 0.11.0), kept as
SQL text: small, and readable in a diff. A new release adds its own store here the same way.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import MetaData, select

from grader.course.store import SCHEMA_VERSION, Store
from tests.course_content import EXERCISE, STUDENTS, course_tables

pytestmark = pytest.mark.unit

STORES = Path(__file__).parent / "upgrade"


def old_rows(path: Path) -> dict[str, tuple[list[str], list[tuple]]]:
    """Each table's columns and rows, as the old store has them (read before any upgrade)."""
    database = sqlite3.connect(path)
    try:
        found = {}
        for (table,) in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            cursor = database.execute(f'SELECT * FROM "{table}"')
            found[table] = ([column[0] for column in cursor.description], cursor.fetchall())
        return found
    finally:
        database.close()


@pytest.mark.parametrize("release", ["0.11.0"])
def test_a_store_of_an_earlier_release_is_upgraded_to_the_newest_schema_with_nothing_lost(tmp_path, release):
    path = tmp_path / "course.db"
    database = sqlite3.connect(path)
    database.executescript((STORES / f"store-{release}.sql").read_text(encoding="utf-8"))
    database.close()
    before = old_rows(path)
    assert set(course_tables()) <= set(before)
    assert all(before[table][1] for table in course_tables()), "the old store is missing a part of the course"

    with Store(path) as store:
        assert store.version == SCHEMA_VERSION  # the newest migration, whichever that is
        tables = MetaData()
        tables.reflect(store.engine)
        with store.reading() as db:
            for table, (columns, rows) in before.items():
                if table == "alembic_version":
                    continue
                assert table in tables.tables, f"{table} was dropped"
                kept = db.execute(select(*(tables.tables[table].c[column] for column in columns))).all()
                assert sorted(map(tuple, kept), key=repr) == sorted(rows, key=repr), table

        # ... and read as the service reads it.
        submissions = store.submissions(EXERCISE)
        assert sorted({s.student for s in submissions}) == sorted(STUDENTS)
        alice = next(s for s in submissions if s.student == "alice")
        assert alice.card is not None and alice.card.score == 9 and [c.score for c in store.scorecards(alice.id)] == [3, 9]
        assert store.adjustments()[("alice", EXERCISE)].points == 0.5
        assert any(s.state == "queued" for s in store.submissions(EXERCISE, student="bob"))
        assert store.setting("session_key") and store.setting("lti_private_key").startswith("-----BEGIN PRIVATE KEY")
        from grader.lti.platforms import platforms

        (platform,) = platforms(store)
        assert platform.issuer == "https://canvas.example.edu" and platform.tier == "premium"
