"""Names and Role Provisioning Services: the course's learners added to the roster, each mapped to their
LMS user, so that a score can go to them before their first launch and the dashboard lists them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlalchemy import and_, select

from grader.course.store import Store
from grader.db import schema
from grader.lti.platforms import Platform
from grader.lti.roles import CourseRole, course_role
from grader.lti.services import NRPS_SCOPE, ServiceError, call, registered
from grader.lti.users import add_member, ensure_user, lms_user

MEMBERSHIPS = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
MAX_PAGES = 200  # a course of 200 pages is past any course; a platform that loops is stopped
NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


@dataclass
class RosterSync:
    context_id: str
    added: list[str] = field(default_factory=list)  # new roster students
    known: int = 0  # learners already on the roster
    skipped: int = 0  # members who are not learners (instructors, assistants), or not active


@dataclass(frozen=True)
class Course:
    platform_id: int
    context_id: str
    title: str
    memberships_url: str


def courses(store: Store) -> list[Course]:
    """The courses launches came from, with where their members are listed (None: the platform did not say)."""
    co = schema.lti_contexts
    with store.reading() as db:
        rows = db.execute(select(co.c.platform_id, co.c.context_id, co.c.title, co.c.memberships_url)
                          .order_by(co.c.title, co.c.context_id)).all()
    return [Course(r[0], r[1], r[2], r[3] or "") for r in rows]


def is_learner(roles: list[str]) -> bool:
    """Whether a member's roles in the course make them a learner (grader.lti.roles): a member who is also
    its instructor or teaching assistant is not added to the roster as a student."""
    return course_role(roles) is CourseRole.LEARNER


def sync_roster(store: Store, course: Course) -> RosterSync:
    """Read every page of the course's memberships and add its active learners to the roster."""
    platform = registered(store, course.platform_id)
    if not course.memberships_url:
        raise ServiceError(f"the course {course.title or course.context_id} has not given its members' address "
                           "(Names and Role Provisioning): enable the service on the tool in the LMS and launch again")
    result = RosterSync(course.context_id)
    url: str | None = course.memberships_url
    for _ in range(MAX_PAGES):
        if url is None:
            break
        answer = call(store, platform, [NRPS_SCOPE], "GET", url, accept=MEMBERSHIPS)
        try:
            members = answer.json().get("members", [])
        except (ValueError, AttributeError):
            raise ServiceError(f"GET {url}: the answer is not a membership container") from None
        for member in members if isinstance(members, list) else []:
            add_learner(store, platform, course.context_id, member, result)
        found = NEXT.search(answer.headers.get("link", ""))
        url = found.group(1) if found else None
    return result


def add_learner(store: Store, platform: Platform, context_id: str, member: object, result: RosterSync) -> None:
    if not isinstance(member, dict) or not member.get("user_id"):
        return
    roles = [str(r) for r in member.get("roles", []) if isinstance(r, str)]
    if member.get("status", "Active") != "Active" or not is_learner(roles):
        result.skipped += 1
        return
    sub = str(member["user_id"])
    name = str(member.get("name") or " ".join(str(member.get(k, "")) for k in ("given_name", "family_name")).strip())
    before = lms_user(store, platform, sub)
    user = ensure_user(store, platform, sub, "student", name, str(member.get("email", "")))
    add_member(store, platform, context_id, sub)
    if before is None or before.student_id is None:
        result.added.append(user.student_id or sub)
    else:
        result.known += 1


def course_of(store: Store, platform_id: int, context_id: str) -> Course | None:
    co = schema.lti_contexts
    with store.reading() as db:
        row = db.execute(select(co.c.title, co.c.memberships_url).where(and_(
            co.c.platform_id == platform_id, co.c.context_id == context_id))).first()
    return None if row is None else Course(platform_id, context_id, row[0], row[1] or "")
