"""One gradebook across a course's exercises: a row per student of the roster (those with no submission
too), with the roster's name, the LMS's user id and email (a student launched from or synced with an LMS;
several, `;`-separated, when more than one LMS knows them), and for each exercise the grade the policy
counts (after the late policy and an instructor's adjustment), its maximum and whether it was late. An
exercise a student has no graded submission of is left empty; an error is empty with its status saying so.

The per-exercise gradebooks (gradebook.py) keep every test's column; this one is what an LMS's or a
registrar's spreadsheet takes in one import."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from sqlalchemy import select

from grader.course.deadlines import Deadlines
from grader.course.gradebook import cell, entry_of, final_score, pick, points, worth
from grader.course.store import Store
from grader.db import schema

PERSON_COLUMNS = ["student", "name", "email", "lms_user_id", "tier"]
EXERCISE_COLUMNS = ("score", "max_score", "status", "late", "adjustment")


def lms_contacts(store: Store) -> dict[str, tuple[str, str]]:
    """{student: (their LMS user ids, their emails)}, each `;`-joined, for the students an LMS knows."""
    us = schema.lti_users
    with store.reading() as db:
        rows = db.execute(select(us.c.student_id, us.c.sub, us.c.email).where(us.c.student_id.is_not(None))
                          .order_by(us.c.platform_id, us.c.sub)).all()
    subs: dict[str, list[str]] = {}
    emails: dict[str, list[str]] = {}
    for student, sub, email in rows:
        subs.setdefault(student, []).append(sub)
        if email and email not in emails.get(student, []):
            emails.setdefault(student, []).append(email)
    return {student: (";".join(found), ";".join(emails.get(student, []))) for student, found in subs.items()}


def class_rows(store: Store, exercises: Iterable[str], policy: str,
               deadlines: Deadlines) -> tuple[list[str], list[dict[str, object]]]:
    """(header, rows): the person's columns, then `<exercise>:score`, `:max_score`, `:status`, `:late` and
    `:adjustment` for each exercise, in the order given."""
    slugs = list(exercises)
    st = schema.students
    with store.reading() as db:
        people = db.execute(select(st.c.id, st.c.name, st.c.tier).order_by(st.c.id)).all()
    adjustments = store.adjustments()
    graded = [s for slug in slugs for s in store.submissions(slug) if s.card is not None]
    chosen = pick(graded, policy, deadlines.is_late, worth=lambda sub: worth(sub, deadlines, adjustments))
    contacts = lms_contacts(store)
    header = [*PERSON_COLUMNS, *(f"{slug}:{column}" for slug in slugs for column in EXERCISE_COLUMNS)]
    table = []
    for student, name, tier in people:
        lms_ids, emails = contacts.get(student, ("", ""))
        row: dict[str, object] = {"student": student, "name": name, "email": emails, "lms_user_id": lms_ids,
                                  "tier": tier}
        for slug in slugs:
            counted = chosen.get((student, slug))
            values: dict[str, object] = dict.fromkeys(EXERCISE_COLUMNS, "")
            if counted is not None and counted.card is not None:
                entry = entry_of(student, counted, deadlines=deadlines, adjustments=adjustments)
                score = final_score(entry.card, entry.deduction, entry.adjustment)
                values = {"score": "" if score is None else score, "max_score": entry.card.exercise_max_score,
                          "status": entry.card.status, "late": entry.late, "adjustment": points(entry.adjustment)}
            row.update({f"{slug}:{column}": value for column, value in values.items()})
        table.append(row)
    return header, table


def class_csv(store: Store, exercises: Iterable[str], policy: str, deadlines: Deadlines) -> str:
    header, table = class_rows(store, exercises, policy, deadlines)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for row in table:
        writer.writerow({key: cell(value) for key, value in row.items()})
    return buffer.getvalue()
