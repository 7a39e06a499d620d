"""LMS users as grader knows them: a roster student (created on first sight, with an id made from the
LMS's email or name) or an instructor; the courses they are in, and what a launch says of a course."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

from sqlalchemy import and_, delete, insert, select, update

from grader.core.scorecard import utc_now as now
from grader.course.store import Store, validate_student_id
from grader.db import schema
from grader.errors import StoreError
from grader.lti.launch import Launch
from grader.lti.platforms import Platform
from grader.service import accounts, staff

ID_LIMIT = 40  # room for a "-2" suffix and more within the store's 64


@dataclass(frozen=True)
class LmsUser:
    platform_id: int
    sub: str
    role: str  # instructor | student | ta
    student_id: str | None
    link_id: int
    ta_id: str | None = None


def student_id_for(email: str, name: str, sub: str, taken: set[str]) -> str:
    """A new student's id: the email's local part, else a slug of the name, else one made from the LMS's
    id; with -2, -3... when another student has it (ids are compared casefolded, as the store does)."""
    candidates = [email.partition("@")[0], name, ""]
    base = ""
    for candidate in candidates:
        slug = unicodedata.normalize("NFKD", candidate).encode("ascii", "ignore").decode().lower()
        slug = re.sub(r"[^a-z0-9._-]+", "-", slug).strip(".-_")[:ID_LIMIT].strip(".-_")
        slug = re.sub(r"\.{2,}", ".", slug)
        try:
            base = validate_student_id(slug) if slug else ""
        except StoreError:
            base = ""
        if base:
            break
    base = base or "lms-" + hashlib.sha256(sub.encode()).hexdigest()[:10]
    found, n = base, 1
    while found.casefold() in taken:
        n += 1
        found = f"{base}-{n}"
    return found


def lms_user(store: Store, platform: Platform, sub: str) -> LmsUser | None:
    us = schema.lti_users
    with store.reading() as db:
        row = db.execute(select(us).where(and_(us.c.platform_id == platform.id, us.c.sub == sub))).first()
    return None if row is None or row.link_id is None else LmsUser(row.platform_id, row.sub, row.role,
                                                                   row.student_id, row.link_id, row.ta_id)


def ensure_user(store: Store, platform: Platform, sub: str, role: str, name: str = "", email: str = "") -> LmsUser:
    """The LMS user in this role (instructor, student or ta): a student is made a roster student on first
    sight (with the platform's tier), a teaching assistant a TA; a user seen before in another role gets a
    link of the new one, and the old role's link is revoked, ending its sessions (a role the LMS no longer
    gives is not kept by a session opened with it). The LMS's name is kept current."""
    if not sub:
        raise StoreError("the launch names no user (sub): an anonymous launch cannot sign anyone in")
    found = lms_user(store, platform, sub)
    us = schema.lti_users
    if found is not None and found.role == role:
        with store.transaction() as db:
            if found.student_id and name.strip():
                db.execute(update(schema.students).where(schema.students.c.id == found.student_id)
                           .values(name=name.strip()[:accounts.NAME_LIMIT]))
            # The LMS's name and email kept current (the gradebook and the change history show them).
            known = {**({"name": name.strip()[:200]} if name.strip() else {}),
                     **({"email": email.strip()[:200]} if email.strip() else {})}
            if known:
                db.execute(update(us).where(and_(us.c.platform_id == platform.id, us.c.sub == sub)).values(**known))
        return found
    student_id = found.student_id if found is not None else None
    ta_id = lms_ta(store, platform, sub)
    if role == "student" and student_id is None:
        taken = {s.id.casefold() for s in accounts.students(store)}
        student_id = student_id_for(email, name, sub, taken)
        accounts.add_student(store, student_id, name, platform.tier)
    if role == "ta" and ta_id is None:
        ta_id = staff.add_ta(store, student_id_for(email, name, sub, {t.id.casefold()
                                                                      for t in staff.teaching_assistants(store)}), name)
    link_id = accounts.external_link(store, role, student_id if role == "student" else None,
                                     ta_id if role == "ta" else None)
    ln, se = schema.links, schema.sessions
    with store.transaction() as db:
        if found is not None:
            db.execute(update(ln).where(and_(ln.c.id == found.link_id, ln.c.revoked_at.is_(None))).values(revoked_at=now()))
            db.execute(delete(se).where(se.c.link_id == found.link_id))
        values = {"role": role, "student_id": student_id, "link_id": link_id, "name": name.strip()[:200],
                  "email": email.strip()[:200], "ta_id": ta_id}
        if found is None and db.execute(select(us.c.sub).where(and_(us.c.platform_id == platform.id,
                                                                     us.c.sub == sub))).first() is None:
            db.execute(insert(us).values(platform_id=platform.id, sub=sub, **values))
        else:
            db.execute(update(us).where(and_(us.c.platform_id == platform.id, us.c.sub == sub)).values(**values))
    return LmsUser(platform.id, sub, role, student_id, link_id, ta_id)


def lms_ta(store: Store, platform: Platform, sub: str) -> str | None:
    """The TA an LMS user was made before (kept when their role changes and comes back), if any."""
    us = schema.lti_users
    with store.reading() as db:
        return db.execute(select(us.c.ta_id).where(and_(us.c.platform_id == platform.id, us.c.sub == sub))).scalar()


def add_member(store: Store, platform: Platform, context_id: str, sub: str) -> None:
    me = schema.lti_members
    with store.transaction() as db:
        if db.execute(select(me.c.sub).where(and_(me.c.platform_id == platform.id, me.c.context_id == context_id,
                                                  me.c.sub == sub))).first() is None:
            db.execute(insert(me).values(platform_id=platform.id, context_id=context_id, sub=sub))


def remember_context(store: Store, launch: Launch) -> None:
    """What the launch says of its course: its title and where its members are listed (NRPS); the user as a
    member; and, for an exercise's resource link with a line item (AGS), where the exercise's grades go."""
    context_id = launch.context_id
    if not context_id:
        return
    platform = launch.platform
    co, li = schema.lti_contexts, schema.lti_line_items
    with store.transaction() as db:
        key = and_(co.c.platform_id == platform.id, co.c.context_id == context_id)
        values = {"title": launch.context_title[:200], "updated_at": now(),
                  **({"memberships_url": launch.memberships_url} if launch.memberships_url else {})}
        if db.execute(select(co.c.context_id).where(key)).first() is None:
            db.execute(insert(co).values(platform_id=platform.id, context_id=context_id, **values))
        else:
            db.execute(update(co).where(key).values(**values))
        lineitem, exercise = str(launch.ags.get("lineitem", "")), launch.exercise
        if lineitem and exercise:
            scopes = " ".join(str(s) for s in launch.ags.get("scope", []) if isinstance(s, str))
            key = and_(li.c.platform_id == platform.id, li.c.context_id == context_id, li.c.exercise == exercise)
            known = db.execute(select(li.c.lineitem).where(key)).first()
            if known is None:
                db.execute(insert(li).values(platform_id=platform.id, context_id=context_id, exercise=exercise,
                                             lineitem=lineitem, scopes=scopes, updated_at=now()))
            else:  # another column: its maximum is read again before a score goes to it
                moved = {"score_maximum": None} if known.lineitem != lineitem else {}
                db.execute(update(li).where(key).values(lineitem=lineitem, scopes=scopes, updated_at=now(), **moved))
    if launch.sub:
        add_member(store, platform, context_id, launch.sub)


def renew_link(store: Store, user: LmsUser) -> LmsUser:
    """A new link for a user whose link was revoked: for a student the instructor gave a new sign-in link
    since (that is how access is restored); the caller checks that."""
    link_id = accounts.external_link(store, user.role, user.student_id)
    us = schema.lti_users
    with store.transaction() as db:
        db.execute(update(us).where(and_(us.c.platform_id == user.platform_id, us.c.sub == user.sub))
                   .values(link_id=link_id))
    return LmsUser(user.platform_id, user.sub, user.role, user.student_id, link_id)
