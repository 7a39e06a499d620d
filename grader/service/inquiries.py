"""Grade inquiries, kept in the store: a student's short question about a released grade (of a submission,
or of one test of it), its thread of answers, and whether it is open or resolved.

Each is bounded so that no one student costs the course more than a handful of rows: a message's length,
how many inquiries a student has open at once and opens in a day, how many messages a thread holds and how
many a student writes in an hour. A refusal is an `InquiryRefused` with the status and sentence to show.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, func, insert, select, update

from grader.course.store import Store
from grader.db import schema

MESSAGE_LIMIT = 1000  # characters: a short message, as a grade inquiry is
OPEN_PER_STUDENT = 3
NEW_PER_DAY = 5
POSTS_PER_THREAD = 40
STUDENT_MESSAGES_PER_HOUR = 10
STATES = ("open", "resolved")


class InquiryRefused(Exception):
    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


@dataclass(frozen=True)
class Inquiry:
    id: int
    submission_id: int
    student: str
    exercise: str
    test_id: str  # "": the whole submission
    test_name: str
    state: str  # open | resolved
    opened_at: str
    updated_at: str


@dataclass(frozen=True)
class Post:
    kind: str  # message | resolved | reopened | regrade
    role: str  # student | ta | instructor
    author: str
    body: str
    posted_at: str


def message_text(typed: str) -> str:
    """A message as kept: line ends made plain, spaces at its ends taken off; refused when empty or longer
    than MESSAGE_LIMIT characters, with a sentence saying which."""
    text = typed.replace("\r\n", "\n").strip()
    if not text:
        raise InquiryRefused(400, "Say what you ask", "The message is empty: write what you ask about the grade.")
    if len(text) > MESSAGE_LIMIT:
        raise InquiryRefused(413, "Message too long", f"A message holds at most {MESSAGE_LIMIT} characters; this "
                                                      f"one has {len(text)}. Shorten it and send it again.")
    return text


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def open_inquiry(store: Store, submission_id: int, student: str, exercise: str, test_id: str, test_name: str,
                 body: str, by: str, now: datetime) -> int:
    """A new open inquiry with its first message, within the student's limits; its id."""
    text = message_text(body)
    iq = schema.inquiries
    with store.transaction() as db:
        same = db.execute(select(iq.c.id).where(and_(iq.c.submission_id == submission_id, iq.c.test_id == test_id,
                                                      iq.c.state == "open"))).scalar()
        if same is not None:
            raise InquiryRefused(409, "Asked already", f"Your inquiry {same} about this is still open: add to it "
                                                       "rather than asking again.")
        opened = db.execute(select(func.count()).select_from(iq).where(and_(iq.c.student_id == student,
                                                                             iq.c.state == "open"))).scalar() or 0
        if opened >= OPEN_PER_STUDENT:
            raise InquiryRefused(429, "Too many open inquiries", f"You have {opened} grade inquiries open: ask again "
                                                                 "once one of them is answered and resolved.")
        today = db.execute(select(func.count()).select_from(iq).where(and_(
            iq.c.student_id == student, iq.c.opened_at >= iso(now - timedelta(days=1))))).scalar() or 0
        if today >= NEW_PER_DAY:
            raise InquiryRefused(429, "Too many inquiries today", f"You opened {today} grade inquiries in the last "
                                                                  "24 hours: ask again tomorrow.")
        made = db.execute(insert(iq).values(submission_id=submission_id, student_id=student, exercise=exercise,
                                            test_id=test_id, test_name=test_name[:300], state="open",
                                            opened_at=iso(now), updated_at=iso(now))).inserted_primary_key
        assert made is not None
        inquiry_id = int(made[0])
        db.execute(insert(schema.inquiry_posts).values(inquiry_id=inquiry_id, kind="message", role="student",
                                                        author=by, body=text, posted_at=iso(now)))
    return inquiry_id


def add_post(store: Store, inquiry_id: int, kind: str, role: str, author: str, body: str, now: datetime,
             state: str | None = None) -> None:
    """A message or an action on the thread (and the inquiry's new state, when it changes), within the
    thread's limits and, for a student, their pace."""
    iq, po = schema.inquiries, schema.inquiry_posts
    with store.transaction() as db:
        count = db.execute(select(func.count()).select_from(po).where(po.c.inquiry_id == inquiry_id)).scalar() or 0
        if count >= POSTS_PER_THREAD:
            raise InquiryRefused(429, "Thread full", f"This inquiry holds {count} messages, its most: resolve it, "
                                                     "or open another.")
        if role == "student" and kind == "message":
            written = db.execute(select(func.count()).select_from(po).where(and_(
                po.c.author == author, po.c.role == "student", po.c.kind == "message",
                po.c.posted_at >= iso(now - timedelta(hours=1))))).scalar() or 0
            if written >= STUDENT_MESSAGES_PER_HOUR:
                raise InquiryRefused(429, "Too many messages", f"You wrote {written} messages in the last hour: "
                                                               "wait for an answer before writing again.")
        db.execute(insert(po).values(inquiry_id=inquiry_id, kind=kind, role=role, author=author, body=body,
                                     posted_at=iso(now)))
        db.execute(update(iq).where(iq.c.id == inquiry_id).values(
            updated_at=iso(now), **({"state": state} if state is not None else {})))


def inquiry(store: Store, inquiry_id: int) -> Inquiry | None:
    found = inquiries(store, inquiry_id=inquiry_id)
    return found[0] if found else None


def inquiries(store: Store, student: str | None = None, state: str | None = None, submission_id: int | None = None,
              inquiry_id: int | None = None) -> list[Inquiry]:
    """The inquiries asked for, oldest first (the queue's order: who waited longest comes first)."""
    iq = schema.inquiries
    query = select(iq.c.id, iq.c.submission_id, iq.c.student_id, iq.c.exercise, iq.c.test_id, iq.c.test_name,
                   iq.c.state, iq.c.opened_at, iq.c.updated_at).order_by(iq.c.opened_at, iq.c.id)
    for column, value in ((iq.c.student_id, student), (iq.c.state, state), (iq.c.submission_id, submission_id),
                          (iq.c.id, inquiry_id)):
        if value is not None:
            query = query.where(column == value)
    with store.reading() as db:
        return [Inquiry(*row) for row in db.execute(query.limit(2000)).all()]


def posts(store: Store, inquiry_id: int) -> list[Post]:
    po = schema.inquiry_posts
    with store.reading() as db:
        rows = db.execute(select(po.c.kind, po.c.role, po.c.author, po.c.body, po.c.posted_at)
                          .where(po.c.inquiry_id == inquiry_id).order_by(po.c.id)).all()
    return [Post(*row) for row in rows]


def counts(store: Store) -> dict[str, int]:
    """How many inquiries are open and resolved, for the dashboards."""
    iq = schema.inquiries
    with store.reading() as db:
        found: dict[str, int] = {str(state): int(n) for state, n in
                                 db.execute(select(iq.c.state, func.count()).group_by(iq.c.state)).all()}
    return {state: int(found.get(state, 0)) for state in STATES}
