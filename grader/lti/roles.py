"""What a launch's roles claim makes its user in the launch's course, as LTI 1.3 defines roles.

LTI 1.3 (Core, appendix A.2) has three kinds of role: system roles (`…/lis/v2/system/person#…`: the user in
the platform), institution roles (`…/lis/v2/institution/person#…`: the user in the institution, such as a
graduate student who teaches some other course) and context roles (`…/lis/v2/membership#…`: the user in the
context the launch comes from, its course). Only context roles say anything about this course, so only they
grant anything here; a system or institution role, a role of another vocabulary and a custom role never do,
whatever its name ends with. A context role may be a principal role (`membership#Instructor`) or one of its
sub-roles (`membership/Instructor#TeachingAssistant`); a principal context role may also be sent by its
simple name alone (`Instructor`), which the specification allows for context roles only.

The course roles, from most rights to fewest:
- instructor: the principal `Instructor` or `Administrator` (the course's own administrator), and the
  Instructor sub-roles that name an instructor (PrimaryInstructor, SecondaryInstructor, Lecturer,
  GuestInstructor, ExternalInstructor) or `Administrator#Administrator`;
- teaching assistant: an Instructor sub-role of the teaching assistant family (TeachingAssistant and its
  Section, Offering, Group, Template, SectionAssociation forms) or Grader. Platforms send the principal role
  beside a sub-role (the specification's best practice), so `Instructor` with `Instructor#TeachingAssistant`
  is a teaching assistant: the sub-role says which kind of instructor;
- learner: the principal `Learner` and its sub-roles (`Learner#Instructor` is a learner who helps teach:
  still a learner);
- none: anything else, ContentDeveloper, Mentor, Manager, Member and Officer included (they build content,
  advise one learner, run the course's administration or belong to it without taking it: none of it is a
  right over its students' code and grades here).
When a claim holds several, the one with the most rights counts.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
PRINCIPALS = ("Administrator", "ContentDeveloper", "Instructor", "Learner", "Mentor", "Manager", "Member", "Officer")
INSTRUCTOR_SUB_ROLES = frozenset({("Instructor", "PrimaryInstructor"), ("Instructor", "SecondaryInstructor"),
                                  ("Instructor", "Lecturer"), ("Instructor", "GuestInstructor"),
                                  ("Instructor", "ExternalInstructor"), ("Administrator", "Administrator")})
ASSISTANT_SUB_ROLES = frozenset({("Instructor", sub) for sub in (
    "TeachingAssistant", "TeachingAssistantSection", "TeachingAssistantSectionAssociation",
    "TeachingAssistantOffering", "TeachingAssistantTemplate", "TeachingAssistantGroup", "Grader")})
LEARNER_SUB_ROLES = frozenset({("Learner", sub) for sub in (
    "Learner", "NonCreditLearner", "GuestLearner", "ExternalLearner", "Instructor")})


class CourseRole(enum.Enum):
    """What the user is in the launch's course (the value: the store's name for it)."""
    INSTRUCTOR = "instructor"
    TEACHING_ASSISTANT = "ta"
    LEARNER = "learner"
    NONE = "none"


def context_role(role: str) -> tuple[str, str] | None:
    """A context role as (principal, sub-role: "" for the principal itself), or None for a role that is not
    one (a system, institution, custom or malformed role). Names are compared exactly, as URIs are."""
    if role in PRINCIPALS:  # the simple name, allowed for principal context roles only
        return (role, "")
    if role.startswith(MEMBERSHIP + "#"):
        principal = role[len(MEMBERSHIP) + 1:]
        return (principal, "") if principal in PRINCIPALS else None
    if role.startswith(MEMBERSHIP + "/"):
        principal, hash_, sub = role[len(MEMBERSHIP) + 1:].partition("#")
        return (principal, sub) if hash_ and principal in PRINCIPALS and sub and "#" not in sub else None
    return None


def course_role(roles: Iterable[object]) -> CourseRole:
    """The course role a launch's (or a course membership's) roles claim gives, by the rules above; anything
    that is not a string is no role."""
    found = {context_role(role) for role in roles if isinstance(role, str)} - {None}
    sub_roles = {role for role in found if role is not None and role[1]}
    assistant = bool(sub_roles & ASSISTANT_SUB_ROLES)
    for role in found:
        assert role is not None
        principal, sub = role
        if role in INSTRUCTOR_SUB_ROLES or (not sub and principal == "Administrator"):
            return CourseRole.INSTRUCTOR
        # The principal Instructor sent beside a teaching assistant's sub-role is that sub-role's principal.
        if not sub and principal == "Instructor" and not assistant:
            return CourseRole.INSTRUCTOR
    if assistant:
        return CourseRole.TEACHING_ASSISTANT
    if any(role is not None and role[0] == "Learner" and (not role[1] or role in LEARNER_SUB_ROLES)
           for role in found):
        return CourseRole.LEARNER
    return CourseRole.NONE
