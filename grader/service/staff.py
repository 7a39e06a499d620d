"""Teaching assistants and the course's settings for them and for grade inquiries, kept in the store.

A TA comes from the roster (a line whose `role` is `ta`) or from an LMS launch as one (grader.lti.roles);
they sign in with a link of their own, as a student does. A TA sees every submission, its code and all its
results and answers grade inquiries; they adjust a grade only where the course allows it (`ta_may_adjust`),
and never release results, change dates, policies or the roster, nor make anyone a sign-in link.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, delete, insert, select, update

from grader.core.scorecard import utc_now as now
from grader.course.store import Store, validate_student_id
from grader.db import schema
from grader.errors import StoreError

NAME_LIMIT = 120
# The course's settings (the store's `settings` rows), with what holds while none was saved.
TA_MAY_ADJUST = "ta_may_adjust"
INQUIRY_WINDOW_DAYS = "inquiry_window_days"
DEFAULT_WINDOW_DAYS = 7
MOST_WINDOW_DAYS = 365


@dataclass(frozen=True)
class TeachingAssistant:
    id: str
    name: str
    link_active: bool


def add_ta(store: Store, ta_id: str, name: str = "") -> str:
    """Add the TA (or rename one known): ids are compared casefolded, as students' are."""
    ta_id = validate_student_id(ta_id)
    ta = schema.teaching_assistants
    with store.transaction() as db:
        known = [t for t in db.execute(select(ta.c.id)).scalars() if t.casefold() == ta_id.casefold()]
        if known and known[0] != ta_id:
            raise StoreError(f"TA id {ta_id!r} differs from {known[0]!r} only in case: use one spelling")
        if known:
            db.execute(update(ta).where(ta.c.id == ta_id).values(name=name.strip()[:NAME_LIMIT]))
        else:
            db.execute(insert(ta).values(id=ta_id, name=name.strip()[:NAME_LIMIT], created_at=now()))
    return ta_id


def teaching_assistants(store: Store) -> list[TeachingAssistant]:
    ta, ln = schema.teaching_assistants, schema.links
    with store.reading() as db:
        active = {r[0] for r in db.execute(select(ln.c.ta_id).where(and_(ln.c.role == "ta",
                                                                          ln.c.revoked_at.is_(None))))}
        rows = db.execute(select(ta.c.id, ta.c.name).order_by(ta.c.id)).all()
    return [TeachingAssistant(r[0], r[1], r[0] in active) for r in rows]


def revoke_ta(store: Store, ta_id: str) -> int:
    """Revoke every link of a TA and end the sessions they opened (an LMS launch as a TA again signs them
    in again: the LMS says who its TAs are); returns how many links."""
    ln, se = schema.links, schema.sessions
    with store.transaction() as db:
        ids = [r[0] for r in db.execute(select(ln.c.id).where(and_(ln.c.ta_id == ta_id, ln.c.revoked_at.is_(None))))]
        if ids:
            db.execute(update(ln).where(ln.c.id.in_(ids)).values(revoked_at=now()))
            db.execute(delete(se).where(se.c.link_id.in_(ids)))
    return len(ids)


def setting(store: Store, key: str, default: str) -> str:
    with store.reading() as db:
        value = db.execute(select(schema.settings.c.value).where(schema.settings.c.key == key)).scalar()
    return default if value is None else str(value)


def set_setting(store: Store, key: str, value: str) -> None:
    st = schema.settings
    with store.transaction() as db:
        if db.execute(update(st).where(st.c.key == key).values(value=value)).rowcount != 1:
            db.execute(insert(st).values(key=key, value=value))


def ta_may_adjust(store: Store) -> bool:
    return setting(store, TA_MAY_ADJUST, "0") == "1"


def inquiry_window_days(store: Store) -> int:
    """How many days after a student's results are released they may ask about them (0: inquiries closed)."""
    value = setting(store, INQUIRY_WINDOW_DAYS, str(DEFAULT_WINDOW_DAYS))
    return min(int(value), MOST_WINDOW_DAYS) if value.isascii() and value.isdigit() else DEFAULT_WINDOW_DAYS
