"""The course role a launch's roles claim gives (grader.lti.roles), as a table: each kind of role (context,
institution, system, custom), principal roles and sub-roles, full URIs and the simple names LTI 1.3 allows
for context roles, and their combinations."""

from __future__ import annotations

import pytest

from grader.lti.roles import CourseRole, course_role

M = "http://purl.imsglobal.org/vocab/lis/v2/membership"
INST = "http://purl.imsglobal.org/vocab/lis/v2/institution/person"
SYS = "http://purl.imsglobal.org/vocab/lis/v2/system/person"
INS, T, L, N = CourseRole.INSTRUCTOR, CourseRole.TEACHING_ASSISTANT, CourseRole.LEARNER, CourseRole.NONE

TABLE = [
    # context roles, full URIs
    ([f"{M}#Instructor"], INS),
    ([f"{M}#Administrator"], INS),
    ([f"{M}#Learner"], L),
    ([f"{M}#ContentDeveloper"], N),
    ([f"{M}#Mentor"], N),
    ([f"{M}#Manager"], N),
    ([f"{M}#Member"], N),
    ([f"{M}#Officer"], N),
    # the simple names of context roles
    (["Instructor"], INS),
    (["Administrator"], INS),
    (["Learner"], L),
    (["ContentDeveloper"], N),
    (["Mentor"], N),
    # sub-roles
    ([f"{M}/Instructor#TeachingAssistant"], T),
    ([f"{M}/Instructor#TeachingAssistantSection"], T),
    ([f"{M}/Instructor#TeachingAssistantOffering"], T),
    ([f"{M}/Instructor#Grader"], T),
    ([f"{M}/Instructor#PrimaryInstructor"], INS),
    ([f"{M}/Instructor#SecondaryInstructor"], INS),
    ([f"{M}/Instructor#Lecturer"], INS),
    ([f"{M}/Administrator#Administrator"], INS),
    ([f"{M}/Administrator#Support"], N),
    ([f"{M}/Administrator#Developer"], N),
    ([f"{M}/Learner#Learner"], L),
    ([f"{M}/Learner#NonCreditLearner"], L),
    ([f"{M}/Learner#Instructor"], L),  # a learner who helps teach: a learner still
    ([f"{M}/Mentor#Advisor"], N),
    ([f"{M}/ContentDeveloper#ContentExpert"], N),
    ([f"{M}/Instructor#NoSuchSubRole"], N),
    # sub-roles have no simple names
    (["TeachingAssistant"], N),
    (["Instructor#TeachingAssistant"], N),
    # institution and system roles grant nothing, whatever they are called
    ([f"{INST}#Instructor"], N),
    ([f"{INST}#Administrator"], N),
    ([f"{INST}#Faculty"], N),
    ([f"{INST}#Student"], N),
    ([f"{SYS}#Administrator"], N),
    ([f"{SYS}#SysAdmin"], N),
    ([f"{SYS}#User"], N),
    # custom and malformed roles
    (["http://example.edu/roles#Instructor"], N),
    (["https://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"], N),  # not the vocabulary's URI
    ([f"{M}#Instructor#Learner"], N),
    ([f"{M}#instructor"], N),
    (["urn:lti:role:ims/lis/Instructor"], N),  # LTI 1.1's form, not LTI 1.3's
    (["instructor"], N),
    ([f"{M}/Instructor#"], N),
    ([""], N),
    ([], N),
    ([None, 3, {"role": f"{M}#Instructor"}], N),
    # combinations: issue 55's attacks first
    ([f"{M}#Learner", f"{INST}#Instructor"], L),
    ([f"{M}#Learner", "http://example.edu/roles#Instructor"], L),
    ([f"{M}#Learner", f"{SYS}#Administrator"], L),
    ([f"{M}#Learner", f"{INST}#Administrator", f"{SYS}#Administrator", f"{INST}#Instructor"], L),
    ([f"{INST}#Instructor", f"{SYS}#Administrator"], N),
    # Canvas's TA: the sub-role with institution and system roles
    ([f"{INST}#Student", f"{M}/Instructor#TeachingAssistant", f"{SYS}#User"], T),
    # the principal sent beside its sub-role (the specification's best practice): the sub-role says which
    ([f"{M}#Instructor", f"{M}/Instructor#TeachingAssistant"], T),
    (["Instructor", f"{M}/Instructor#TeachingAssistant"], T),
    ([f"{M}#Instructor", f"{M}/Instructor#PrimaryInstructor"], INS),
    ([f"{M}#Instructor", f"{M}/Instructor#PrimaryInstructor", f"{M}/Instructor#TeachingAssistant"], INS),
    ([f"{M}#Administrator", f"{M}/Instructor#TeachingAssistant"], INS),
    # the most rights count
    ([f"{M}#Learner", f"{M}#Instructor"], INS),
    (["Learner", "Instructor"], INS),
    ([f"{M}#Learner", f"{M}/Instructor#TeachingAssistant"], T),
    ([f"{M}#Learner", f"{M}#Mentor"], L),
    ([f"{M}#Mentor", f"{M}#ContentDeveloper", f"{INST}#Instructor"], N),
    ([f"{M}#Learner", f"{M}/Learner#Instructor", f"{INST}#Faculty"], L),
]


@pytest.mark.unit
@pytest.mark.parametrize(("roles", "expected"), TABLE, ids=[" + ".join(map(str, r)) or "none" for r, _ in TABLE])
def test_a_roles_claim_gives_the_course_role_lti_defines(roles, expected):
    assert course_role(roles) is expected
