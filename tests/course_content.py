"""A small course in a store, with a row in every kind of table a term fills, and every table's rows read
back: what a backup's restore and an upgrade of an old store must keep, compared table by table.

`python -m tests.course_content PATH` writes the course into a new SQLite store at PATH (how
tests/upgrade/store-0.11.0.db was made, with grader 0.11.0).
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, insert, select

from grader.core.scorecard import Scorecard
from grader.course.store import Store
from grader.db import schema

EXERCISE = "continuous_batching"
STUDENTS = ("alice", "bob", "zoë")
ISSUER = "https://canvas.example.edu"


def card(student: str, score: int) -> Scorecard:
    return Scorecard(exercise=EXERCISE, tier="premium", submission_sha256=f"{student}-sha", status="graded",
                     score=score, max_score=10)


def fill_course(store: Store) -> None:
    """Students, submissions (graded, regraded, one queued), adjustments, an extension, changed terms, an
    LTI platform with its deployment, course, members, line item, and a score not yet sent to the LMS."""
    from grader.lti.keys import tool_key
    from grader.lti.platforms import add_platform

    tool_key(store)  # the tool's private key, in the settings beside the session key

    for number, student in enumerate(STUDENTS):
        content = f"# {student}'s scheduler\nLIMIT = {number}\n".encode()
        sid, _ = store.add_submission(student, EXERCISE, "premium", f"{student}-sha", "scheduler.py", content)
        store.save_scorecard(sid, card(student, 3 + number))
        if student == "alice":
            store.save_scorecard(sid, card(student, 9))  # a regrade: both kept
            store.adjust(sid, 1.5, "a fine explanation in the docstring", "instructor")
            store.adjust(sid, 0.5, "second look", "instructor")
    store.add_submission("bob", EXERCISE, "premium", "bob-sha-2", "scheduler.py", b"LIMIT = 99\n", state="queued")
    store.set_extension("bob", EXERCISE, datetime(2026, 12, 24, 23, 59, tzinfo=timezone.utc))
    store.set_exercise_terms(EXERCISE, {"due": "2026-12-20T23:59:00+00:00"}, by="instructor")
    platform = add_platform(store, ISSUER, "10000000000042", ["1:abc"], f"{ISSUER}/api/lti/authorize_redirect",
                            f"{ISSUER}/login/oauth2/token", f"{ISSUER}/api/lti/security/jwks", tier="premium")
    with store.transaction() as db:
        db.execute(insert(schema.lti_users).values(platform_id=platform.id, sub="canvas-alice", role="student",
                                                   student_id="alice", name="Alice A."))
        db.execute(insert(schema.lti_contexts).values(platform_id=platform.id, context_id="course-7",
                                                      title="Systems 101", memberships_url=f"{ISSUER}/nrps",
                                                      updated_at="2026-12-01T10:00:00+00:00"))
        db.execute(insert(schema.lti_members).values(platform_id=platform.id, context_id="course-7",
                                                     sub="canvas-alice"))
        db.execute(insert(schema.lti_line_items).values(platform_id=platform.id, context_id="course-7",
                                                        exercise=EXERCISE, lineitem=f"{ISSUER}/lineitems/3",
                                                        scopes="score lineitem", updated_at="2026-12-01T10:00:00+00:00"))
        db.execute(insert(schema.lti_outbox).values(
            platform_id=platform.id, lineitem=f"{ISSUER}/lineitems/3", sub="canvas-alice", student_id="alice",
            exercise=EXERCISE, score=11.0, max_score=10.0, state="pending", attempts=2, next_try=1.8e9,
            last_error="the platform answered 503", created_at="2026-12-02T09:00:00+00:00"))


def table_rows(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the store (the schema's version table included), in a stable order."""
    tables = MetaData()
    tables.reflect(store.engine)
    found: dict[str, list[tuple[Any, ...]]] = {}
    with store.reading() as db:
        for name, table in sorted(tables.tables.items()):
            found[name] = sorted((tuple(row) for row in db.execute(select(table))), key=repr)
    return found


def course_tables() -> list[str]:
    """The tables fill_course puts rows in."""
    return ["students", "submissions", "scorecards", "adjustments", "extensions", "exercise_terms", "settings",
            "lti_platforms", "lti_deployments", "lti_users", "lti_contexts", "lti_members", "lti_line_items",
            "lti_outbox"]


if __name__ == "__main__":
    target = Path(sys.argv[1])
    if target.exists():
        sys.exit(f"{target} exists")
    with Store(target) as made:
        fill_course(made)
    print(f"{target}: a course written by this grader, schema {Store(target).version}")
