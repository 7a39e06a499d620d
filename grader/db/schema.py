"""The tables, as SQLAlchemy Core sees them at the newest migration.

The migrations in `migrations/versions/` are what creates them (on SQLite and PostgreSQL alike); this
module only describes the result, for queries. A change of schema is a new migration plus a change here.
"""

from __future__ import annotations

from sqlalchemy import (
                        Boolean,
                        Column,
                        Float,
                        ForeignKey,
                        Integer,
                        LargeBinary,
                        MetaData,
                        String,
                        Table,
                        Text,
                        UniqueConstraint,
)

metadata = MetaData()

students = Table(
    "students", metadata,
    Column("id", String(64), primary_key=True),
    Column("created_at", Text, nullable=False),
    Column("name", Text, nullable=False, server_default=""),
    Column("tier", String(16), nullable=False, server_default="free"),
)

# A submission's `state` follows stored -> queued -> grading -> graded. The store is the truth: a
# submission is written before it is queued, and a grading counts only if it still holds the claim.
submissions = Table(
    "submissions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("student_id", String(64), ForeignKey("students.id"), nullable=False),
    Column("exercise", Text, nullable=False),
    Column("tier", String(16), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("filename", Text, nullable=False),
    Column("content", LargeBinary, nullable=False),
    Column("submitted_at", Text, nullable=False),
    Column("state", String(16), nullable=False, server_default="stored"),
    Column("queued_at", Float, nullable=True),     # epoch seconds: the order of the queue
    Column("claim", String(64), nullable=True),    # who grades it now (random per attempt)
    Column("lease_until", Float, nullable=True),   # epoch seconds; renewed while grading
    Column("attempts", Integer, nullable=False, server_default="0"),
    UniqueConstraint("student_id", "exercise", "tier", "sha256"),
)

# Every grading of a submission is kept (a regrade adds one); the newest is the current scorecard.
scorecards = Table(
    "scorecards", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("submission_id", Integer, ForeignKey("submissions.id"), nullable=False),
    Column("status", String(16), nullable=False),
    Column("score", Integer, nullable=False),
    Column("max_score", Integer, nullable=False),
    Column("scorecard", Text, nullable=False),
    Column("graded_at", Text, nullable=False),
)

settings = Table(
    "settings", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

# Sign-in links: only a hash of the token is kept, so the store alone cannot sign anyone in.
links = Table(
    "links", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("token_sha256", String(64), nullable=False, unique=True),
    Column("role", String(16), nullable=False),  # instructor | student | ta
    Column("student_id", String(64), ForeignKey("students.id"), nullable=True),
    Column("one_time", Boolean, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("used_at", Text, nullable=True),
    Column("revoked_at", Text, nullable=True),
    Column("ta_id", String(64), ForeignKey("teaching_assistants.id"), nullable=True),  # a TA's link: whose
    Column("label", Text, nullable=False, server_default=""),  # whom an instructor's link is for
)

# Teaching assistants (from the roster's `role` column, or an LMS launch as one): they see every submission
# and its code and answer grade inquiries, and adjust grades only where the course allows it.
teaching_assistants = Table(
    "teaching_assistants", metadata,
    Column("id", String(64), primary_key=True),
    Column("name", Text, nullable=False, server_default=""),
    Column("created_at", Text, nullable=False),
)

sessions = Table(
    "sessions", metadata,
    Column("token_sha256", String(64), primary_key=True),
    Column("link_id", Integer, ForeignKey("links.id"), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

predictions = Table(
    "predictions", metadata,
    Column("student_id", String(64), ForeignKey("students.id"), primary_key=True),
    Column("exercise", String(64), primary_key=True),
    Column("choice", Text, nullable=False),
    Column("correct", Boolean, nullable=False),
    Column("answered_at", Text, nullable=False),
)

# A student's own due date for an exercise (an extension): it replaces the exercise's `[web] due`, and
# lets the student submit after `[web] closes` until it.
extensions = Table(
    "extensions", metadata,
    Column("student_id", String(64), ForeignKey("students.id"), primary_key=True),
    Column("exercise", String(64), primary_key=True),
    Column("due", Text, nullable=False),
    Column("granted_at", Text, nullable=False),
)

# An exercise's terms as changed in the dashboard (due, closes, late policy, release): every change is a
# row, kept with who made it; the newest row of a key holds. A key with no row keeps exercise.toml's value.
exercise_terms = Table(
    "exercise_terms", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("exercise", String(64), nullable=False),
    Column("key", String(32), nullable=False),
    Column("value", Text, nullable=False),  # JSON; null takes the key back to exercise.toml's value
    Column("changed_by", Text, nullable=False),
    Column("changed_at", Text, nullable=False),
)

# Points an instructor adds to (or takes from) a student's grade of an exercise, with why: every change is a
# row; the newest of (student, exercise) holds, whichever submission counts (0 points and no comment: none).
# submission_id: the submission it was made on (its page), kept for the record.
adjustments = Table(
    "adjustments", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("submission_id", Integer, ForeignKey("submissions.id"), nullable=True),
    Column("points", Float, nullable=False),
    Column("comment", Text, nullable=False),
    Column("made_by", Text, nullable=False),
    Column("made_at", Text, nullable=False),
    Column("student_id", String(64), nullable=False),
    Column("exercise", String(64), nullable=False),
)

# LTI 1.3 (grader/lti/): the platforms (LMSs) registered with `grader lti add-platform`, each with the
# deployments it may launch from and the tier the students it creates get.
lti_platforms = Table(
    "lti_platforms", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("issuer", Text, nullable=False),
    Column("client_id", Text, nullable=False),
    Column("auth_login_url", Text, nullable=False),
    Column("auth_token_url", Text, nullable=False),
    Column("keyset_url", Text, nullable=False),
    Column("tier", String(16), nullable=False, server_default="free"),
    Column("created_at", Text, nullable=False),
    UniqueConstraint("issuer", "client_id"),
)

lti_deployments = Table(
    "lti_deployments", metadata,
    Column("platform_id", Integer, ForeignKey("lti_platforms.id"), primary_key=True),
    Column("deployment_id", String(255), primary_key=True),
)

# The nonce of every OIDC login, with the state it was made with: a launch uses it up (used_at), so an
# id_token replayed is refused.
lti_nonces = Table(
    "lti_nonces", metadata,
    Column("nonce", String(64), primary_key=True),
    Column("state", String(64), nullable=False),
    Column("platform_id", Integer, ForeignKey("lti_platforms.id"), nullable=False),
    Column("issued_at", Float, nullable=False),
    Column("used_at", Float, nullable=True),
)

# An LMS user (the platform's `sub`) as grader knows them: a roster student, or an instructor; the link
# row their sessions hang from (never usable as a sign-in link: its token was thrown away).
lti_users = Table(
    "lti_users", metadata,
    Column("platform_id", Integer, ForeignKey("lti_platforms.id"), primary_key=True),
    Column("sub", String(255), primary_key=True),
    Column("role", String(16), nullable=False),  # instructor | student | ta
    Column("student_id", String(64), ForeignKey("students.id"), nullable=True),
    Column("link_id", Integer, ForeignKey("links.id"), nullable=True),
    Column("name", Text, nullable=False, server_default=""),
    Column("ta_id", String(64), ForeignKey("teaching_assistants.id"), nullable=True),  # the TA they are, once one
    Column("email", Text, nullable=False, server_default=""),
)

# A course (the platform's context) as the launches last described it: where its members are listed (NRPS).
lti_contexts = Table(
    "lti_contexts", metadata,
    Column("platform_id", Integer, ForeignKey("lti_platforms.id"), primary_key=True),
    Column("context_id", String(255), primary_key=True),
    Column("title", Text, nullable=False, server_default=""),
    Column("memberships_url", Text, nullable=True),
    Column("updated_at", Text, nullable=False),
)

# Who is in which course (from launches and the roster sync): a score goes to a course's line item only
# for its members.
lti_members = Table(
    "lti_members", metadata,
    Column("platform_id", Integer, ForeignKey("lti_platforms.id"), primary_key=True),
    Column("context_id", String(255), primary_key=True),
    Column("sub", String(255), primary_key=True),
)

# Where an exercise's grades go in a course's gradebook (AGS), and the scopes the platform granted.
lti_line_items = Table(
    "lti_line_items", metadata,
    Column("platform_id", Integer, ForeignKey("lti_platforms.id"), primary_key=True),
    Column("context_id", String(255), primary_key=True),
    Column("exercise", String(64), primary_key=True),
    Column("lineitem", Text, nullable=False),
    Column("scopes", Text, nullable=False, server_default=""),
    Column("updated_at", Text, nullable=False),
    Column("score_maximum", Float, nullable=True),  # the line item's scoreMaximum as last read or set
)

# Scores on their way to a line item: a row per score to send, kept until the platform took it, retried
# with back-off while it fails (the last error kept for the dashboard). `score` is what was sent last for
# (line item, user): a new row is made only when the standing changes.
lti_outbox = Table(
    "lti_outbox", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("platform_id", Integer, ForeignKey("lti_platforms.id"), nullable=False),
    Column("lineitem", Text, nullable=False),
    Column("sub", String(255), nullable=False),
    Column("student_id", String(64), nullable=False),
    Column("exercise", String(64), nullable=False),
    Column("score", Float, nullable=False),
    Column("max_score", Float, nullable=False),
    Column("state", String(16), nullable=False),  # pending | sent
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_try", Float, nullable=False),
    Column("last_error", Text, nullable=False, server_default=""),
    Column("created_at", Text, nullable=False),
    Column("sent_at", Text, nullable=True),
    Column("comment", Text, nullable=False, server_default=""),  # the adjustment's note, the score's comment
)

# A student's question about a released grade: of a submission, or of one test of it (`test_id`, with the
# name it had when asked); open until an instructor or TA resolves it, reopened by either side.
inquiries = Table(
    "inquiries", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("submission_id", Integer, ForeignKey("submissions.id"), nullable=False),
    Column("student_id", String(64), ForeignKey("students.id"), nullable=False, index=True),
    Column("exercise", String(64), nullable=False),
    Column("test_id", Text, nullable=False, server_default=""),
    Column("test_name", Text, nullable=False, server_default=""),
    Column("state", String(16), nullable=False),  # open | resolved
    Column("opened_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
)

# An inquiry's thread: messages, and what was done (resolved, reopened, a regrade asked), with who.
inquiry_posts = Table(
    "inquiry_posts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("inquiry_id", Integer, ForeignKey("inquiries.id"), nullable=False, index=True),
    Column("kind", String(16), nullable=False),  # message | resolved | reopened | regrade
    Column("role", String(16), nullable=False),  # student | ta | instructor
    Column("author", Text, nullable=False),
    Column("body", Text, nullable=False, server_default=""),
    Column("posted_at", Text, nullable=False),
)
