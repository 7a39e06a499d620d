"""Students, tiers, sign-in links and sessions, kept in the store.

A sign-in link carries a random token; the store keeps only its SHA-256, so a copy of the store
cannot sign anyone in. The instructor's link works once; a student's works until it is revoked, and
revoking it also ends every session it opened.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import re
import secrets
import time
from dataclasses import dataclass

from sqlalchemy import Connection, and_, delete, func, insert, select, update

from grader.core.scorecard import utc_now as now
from grader.course.store import Store, validate_student_id
from grader.db import schema
from grader.errors import StoreError
from grader.service import staff

# A student's plan: free students see what an exercise gives for free, premium ones everything.
PLANS = ("free", "premium")

SESSION_SECONDS = 7 * 24 * 3600
NAME_LIMIT = 120


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Student:
    id: str
    name: str
    tier: str
    link_active: bool


@dataclass(frozen=True)
class Session:
    role: str  # instructor | student | ta
    student: str | None
    tier: str
    csrf: str
    link_id: int = 0  # the sign-in link the session came from: who did what, in the store's records
    expires_at: float = float("inf")  # time.time() when the session ends
    ta: str | None = None  # a teaching assistant's id (role "ta")
    name: str = ""  # whom: the name an instructor's link was made for, or the LMS's name of its user
    lms_user: str = ""  # the LMS's id of the user (their `sub`) when the session came from a launch

    @property
    def is_instructor(self) -> bool:
        return self.role == "instructor"

    @property
    def is_ta(self) -> bool:
        return self.role == "ta"

    @property
    def is_staff(self) -> bool:
        """An instructor or a teaching assistant: who sees every submission, its code and all its results."""
        return self.is_instructor or self.is_ta

    @property
    def by(self) -> str:
        """Who this is in the store's records of changes, by name (instructors share one account: the LMS
        user a launch signed in, or the person an instructor link was made for, with the link)."""
        if self.is_ta:
            return f"TA {self.ta}"
        if not self.is_instructor:
            return f"student {self.student}"
        if self.lms_user:
            return f"{self.name or 'instructor'} (LMS user {self.lms_user})"
        return f"{self.name or 'instructor'} (sign-in link {self.link_id})"

    @property
    def account(self) -> tuple[str, str | None]:
        """Whose session this is: the instructors share one account, each student and TA has their own."""
        return (self.role, self.ta if self.is_ta else self.student)

    def csrf_ok(self, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(self.csrf.encode(), str(sent).encode())


def add_student(store: Store, student: str, name: str = "", tier: str = "free") -> None:
    student = validate_student_id(student)
    if tier not in PLANS:
        raise StoreError(f"unknown tier {tier!r} for {student}: use {' or '.join(PLANS)}")
    with store.transaction() as db:
        store.ensure_student(db, student)
        db.execute(update(schema.students).where(schema.students.c.id == student)
                   .values(name=name.strip()[:NAME_LIMIT], tier=tier))


def set_tier(store: Store, student: str, tier: str) -> None:
    if tier not in PLANS:
        raise StoreError(f"unknown tier {tier!r}: use {' or '.join(PLANS)}")
    with store.transaction() as db:
        done = db.execute(update(schema.students).where(schema.students.c.id == student).values(tier=tier))
        if done.rowcount != 1:
            raise StoreError(f"no student {student!r}")


def students(store: Store) -> list[Student]:
    st, ln = schema.students, schema.links
    with store.reading() as db:
        active = {r[0] for r in db.execute(select(ln.c.student_id).where(and_(
            ln.c.role == "student", ln.c.revoked_at.is_(None))))}
        rows = db.execute(select(st.c.id, st.c.name, st.c.tier).order_by(st.c.id)).all()
    return [Student(r[0], r[1], r[2], r[0] in active) for r in rows]


def student(store: Store, student_id: str) -> Student | None:
    return next((s for s in students(store) if s.id == student_id), None)


def decode_roster(data: bytes) -> str:
    """A roster file's text: UTF-8, with or without the byte order mark spreadsheets write."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise StoreError(f"roster line {line}: not UTF-8 text (save the roster as CSV UTF-8)") from None


class RosterError(StoreError):
    """A roster refused whole, with every problem found in it (a line each), so that one correction
    fixes them all rather than one import per bad line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


ROSTER_ROLES = ("student", "ta")


def parse_roster(text: str) -> list[tuple[str, str, str, str]]:
    """(id, name, tier, role) rows of a roster CSV with a header: `id` required, `name`, `tier` and `role`
    (student, the default, or ta: a teaching assistant) optional.
    A line CSV cannot read (a quote left open), a column named twice, a bad id or tier and a student
    listed twice are refused (RosterError), every such line named at once."""
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff")), strict=True)
    records: list[tuple[int, list[str]]] = []
    problems: list[str] = []
    try:
        for record in reader:
            if any(cell.strip() for cell in record):
                records.append((reader.line_num, record))
    except csv.Error as exc:
        # The reader cannot go on past such a line (a quote left open takes the rest of the file with
        # it), but the lines before it are checked all the same.
        problems.append(f"roster line {reader.line_num}: {exc}")
    fields = [f.strip().lower() for f in records[0][1]] if records else []
    if "id" not in fields:
        raise RosterError(["the roster needs a header line with an 'id' column (and optionally 'name', 'tier', "
                           "'role')"])
    twice = sorted({f for f in fields if f and fields.count(f) > 1})
    if twice:
        raise RosterError([f"the roster's header names the column {twice[0]!r} twice"])
    rows: list[tuple[str, str, str, str]] = []
    lines: dict[str, int] = {}
    for number, record in records[1:]:
        row = dict(zip(fields, record))
        student_id = row.get("id", "").strip()
        if not student_id:
            continue
        role = row.get("role", "").strip().lower() or "student"
        found = roster_line_problem(student_id, row.get("tier", ""), lines) or (
            "" if role in ROSTER_ROLES else f"unknown role {role[:20]!r}; use student or ta")
        if found:
            problems.append(f"roster line {number}: {found}")
            continue
        student_id = validate_student_id(student_id)
        lines[student_id.lower()] = number
        rows.append((student_id, row.get("name", "").strip(), row.get("tier", "").strip().lower() or "free", role))
    if problems:
        raise RosterError(sorted(problems, key=line_number))
    return rows


def roster_line_problem(student_id: str, tier: str, lines: dict[str, int]) -> str:
    """What is wrong with a roster line ("" when nothing), given the lines of the students before it."""
    try:
        student_id = validate_student_id(student_id)
    except StoreError as exc:
        return str(exc)
    tier = tier.strip().lower() or "free"
    if tier not in PLANS:
        return f"unknown tier {tier!r}; use {' or '.join(PLANS)}"
    if student_id.lower() in lines:  # erin and Erin are one student (see Store.ensure_student)
        return f"{student_id} is listed already, on line {lines[student_id.lower()]}"
    return ""


def line_number(problem: str) -> int:
    found = re.match(r"roster line (\d+):", problem)
    return int(found.group(1)) if found else 0


def import_roster(store: Store, text: str) -> list[tuple[str, str | None]]:
    """Add or update every student and TA of the roster; (id, new link token or None when one is active),
    a TA's id followed by " (TA)"."""
    rows = parse_roster(text)
    known = {s.id.lower(): s.id for s in students(store)}
    known_tas = {t.id.lower(): t.id for t in staff.teaching_assistants(store)}
    clashes = [f"the roster's {student_id} differs from the {'TA' if role == 'ta' else 'student'} "
               f"{among[student_id.lower()]} only in case: use one spelling"
               for student_id, _, _, role in rows
               for among in [known_tas if role == "ta" else known]
               if among.get(student_id.lower(), student_id) != student_id]
    if clashes:  # refused whole, before anyone is added
        raise RosterError(clashes)
    active = {s.id for s in students(store) if s.link_active}
    active_tas = {t.id for t in staff.teaching_assistants(store) if t.link_active}
    out: list[tuple[str, str | None]] = []
    for student_id, name, tier, role in rows:
        if role == "ta":
            staff.add_ta(store, student_id, name)
            out.append((f"{student_id} (TA)", None if student_id in active_tas
                        else new_link(store, "ta", ta_id=student_id)))
            continue
        add_student(store, student_id, name, tier)
        out.append((student_id, None if student_id in active else new_link(store, "student", student_id)))
    return out


def new_link(store: Store, role: str, student_id: str | None = None, ta_id: str | None = None,
             label: str = "") -> str:
    """A fresh sign-in token (the secret part of the link); only its hash is stored. A TA's link names the
    TA (`ta_id`); `label`: whom an instructor's link is for (the change history names them)."""
    token = secrets.token_urlsafe(24)
    ln = schema.links
    with store.transaction() as db:
        if role == "instructor":  # a new instructor link replaces any earlier one not used yet
            db.execute(update(ln).where(and_(ln.c.role == "instructor", ln.c.used_at.is_(None),
                                             ln.c.revoked_at.is_(None))).values(revoked_at=now()))
        db.execute(insert(schema.links).values(token_sha256=digest(token), role=role, student_id=student_id,
                                               one_time=role == "instructor", created_at=now(), ta_id=ta_id,
                                               label=" ".join(label.split())[:NAME_LIMIT]))
    return token


def revoke_links(store: Store, student_id: str) -> int:
    """Revoke every link of a student and end the sessions they opened; returns how many links."""
    ln, se = schema.links, schema.sessions
    with store.transaction() as db:
        ids = [r[0] for r in db.execute(select(ln.c.id).where(and_(ln.c.student_id == student_id,
                                                                    ln.c.revoked_at.is_(None))))]
        if ids:
            db.execute(update(ln).where(ln.c.id.in_(ids)).values(revoked_at=now()))
            db.execute(delete(se).where(se.c.link_id.in_(ids)))
    return len(ids)


@dataclass(frozen=True)
class LinkHolder:
    """Whom a sign-in link signs in, as its page names them before anyone presses its button."""
    role: str  # instructor | student | ta
    student: str | None
    name: str
    one_time: bool
    ta: str | None = None

    @property
    def account(self) -> tuple[str, str | None]:
        return (self.role, self.ta if self.role == "ta" else self.student)


def link_holder(store: Store, token: str) -> LinkHolder | None:
    """Whom a link that still signs someone in is for, using nothing up; None for a link that signs
    nobody in (unknown, revoked, or a one-time link used already)."""
    ln, st, ta = schema.links, schema.students, schema.teaching_assistants
    with store.reading() as db:
        link = db.execute(select(ln.c.role, ln.c.student_id, ln.c.one_time, ln.c.used_at, ln.c.ta_id,
                                 st.c.name, ta.c.name.label("ta_name"))
                          .select_from(ln.outerjoin(st, st.c.id == ln.c.student_id)
                                       .outerjoin(ta, ta.c.id == ln.c.ta_id))
                          .where(and_(ln.c.token_sha256 == digest(token), ln.c.revoked_at.is_(None)))).first()
    if link is None or (link.one_time and link.used_at is not None):
        return None
    return LinkHolder(role=link.role, student=link.student_id, name=link.name or link.ta_name or "",
                      one_time=bool(link.one_time), ta=link.ta_id)


def sign_in(store: Store, token: str) -> str | None:
    """A new session's token for a valid link (a one-time link is used up), else None."""
    ln = schema.links
    with store.transaction() as db:
        link = db.execute(select(ln.c.id, ln.c.one_time).where(and_(
            ln.c.token_sha256 == digest(token), ln.c.revoked_at.is_(None)))).first()
        if link is None:
            return None
        if link.one_time:
            used = db.execute(update(ln).where(and_(ln.c.id == link.id, ln.c.used_at.is_(None)))
                              .values(used_at=now()))
            if used.rowcount != 1:
                return None
        return new_session(db, link.id)


def new_session(db: Connection, link_id: int) -> str:
    session = secrets.token_urlsafe(32)
    moment = time.time()
    db.execute(delete(schema.sessions).where(schema.sessions.c.expires_at < moment))
    db.execute(insert(schema.sessions).values(token_sha256=digest(session), link_id=link_id,
                                              csrf=secrets.token_urlsafe(24), created_at=moment,
                                              expires_at=moment + SESSION_SECONDS))
    return session


def external_link(store: Store, role: str, student_id: str | None = None, ta_id: str | None = None) -> int:
    """A link row for someone who signs in elsewhere (an LMS launch): sessions hang from a link, but this
    one's token is thrown away at once, so it never signs anyone in by itself. Marked used, so that a new
    instructor link (which revokes the unused ones) leaves it be; revoking a student's links ends its
    sessions as it ends the others'."""
    with store.transaction() as db:
        made = db.execute(insert(schema.links).values(
            token_sha256=digest(secrets.token_urlsafe(24)), role=role, student_id=student_id, one_time=False,
            created_at=now(), used_at=now(), ta_id=ta_id)).inserted_primary_key
    assert made is not None
    return int(made[0])


def open_session(store: Store, link_id: int) -> str | None:
    """A new session's token from a link that is not revoked (an external link: see external_link)."""
    ln = schema.links
    with store.transaction() as db:
        alive = db.execute(select(ln.c.id).where(and_(ln.c.id == link_id, ln.c.revoked_at.is_(None)))).first()
        return None if alive is None else new_session(db, link_id)


def session(store: Store, token: str | None) -> Session | None:
    if not token or len(token) > 128:
        return None
    se, ln, st, us = schema.sessions, schema.links, schema.students, schema.lti_users
    with store.reading() as db:
        row = db.execute(
            select(ln.c.id, ln.c.role, ln.c.student_id, ln.c.ta_id, se.c.csrf, se.c.expires_at, st.c.tier,
                   ln.c.label, us.c.sub, us.c.name)
            .select_from(se.join(ln, ln.c.id == se.c.link_id).outerjoin(st, st.c.id == ln.c.student_id)
                         .outerjoin(us, us.c.link_id == ln.c.id))
            .where(and_(se.c.token_sha256 == digest(token), ln.c.revoked_at.is_(None)))).first()
    if row is None or row.expires_at < time.time() or (row.role == "ta" and not row.ta_id):
        return None
    return Session(role=row.role, student=row.student_id, tier=row.tier or "premium", csrf=row.csrf,
                   link_id=row.id, expires_at=float(row.expires_at), name=row.name or row.label or "",
                   lms_user=row.sub or "", ta=row.ta_id)


# How a change made before the history named people reads: the link it names is looked up.
UNNAMED = re.compile(r"instructor \(sign-in link (\d+)\)")


def named_by(store: Store, by: str) -> str:
    """A record's `by` naming a person: one written as "instructor (sign-in link N)" names the LMS user or
    the person link N was made for, when the store knows them (else it stays as it is)."""
    found = UNNAMED.fullmatch(by)
    if found is None:
        return by
    ln, us = schema.links, schema.lti_users
    with store.reading() as db:
        row = db.execute(select(ln.c.label, us.c.sub, us.c.name).select_from(ln.outerjoin(us, us.c.link_id == ln.c.id))
                         .where(ln.c.id == int(found.group(1)))).first()
    if row is None:
        return by
    if row.sub:
        return f"{row.name or 'instructor'} (LMS user {row.sub})"
    return f"{row.label} (sign-in link {found.group(1)})" if row.label else by


def sign_out(store: Store, token: str | None) -> None:
    if token:
        with store.transaction() as db:
            db.execute(delete(schema.sessions).where(schema.sessions.c.token_sha256 == digest(token)))


def record_prediction(store: Store, student_id: str, exercise: str, choice: str, correct: bool) -> None:
    """The first answer counts: answering again changes nothing."""
    pr = schema.predictions
    with store.transaction() as db:
        if db.execute(select(pr.c.choice).where(and_(pr.c.student_id == student_id,
                                                     pr.c.exercise == exercise))).first() is None:
            db.execute(insert(pr).values(student_id=student_id, exercise=exercise, choice=choice,
                                         correct=correct, answered_at=now()))


def prediction(store: Store, student_id: str, exercise: str) -> tuple[str, bool] | None:
    pr = schema.predictions
    with store.reading() as db:
        row = db.execute(select(pr.c.choice, pr.c.correct).where(and_(
            pr.c.student_id == student_id, pr.c.exercise == exercise))).first()
    return (row[0], bool(row[1])) if row else None


def predictions_of(store: Store, student_id: str) -> dict[str, tuple[str, bool]]:
    """{exercise: (the choice, whether right)} for every question the student answered."""
    pr = schema.predictions
    with store.reading() as db:
        rows = db.execute(select(pr.c.exercise, pr.c.choice, pr.c.correct).where(pr.c.student_id == student_id))
        return {exercise: (choice, bool(correct)) for exercise, choice, correct in rows}


def prediction_counts(store: Store, exercise: str) -> dict[str, int]:
    """{choice: how many students answered it} for the exercise's question."""
    pr = schema.predictions
    with store.reading() as db:
        rows = db.execute(select(pr.c.choice, func.count()).where(pr.c.exercise == exercise).group_by(pr.c.choice))
        return {choice: count for choice, count in rows}
