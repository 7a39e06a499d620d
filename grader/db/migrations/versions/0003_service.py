"""The web service and its queue: tiers and names of students, a submission's grading state, every
grading kept (a regrade adds a scorecard), sign-in links, sessions and recorded predictions."""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("students") as table:
        table.add_column(sa.Column("name", sa.Text, nullable=False, server_default=""))
        table.add_column(sa.Column("tier", sa.String(16), nullable=False, server_default="free"))
    with op.batch_alter_table("submissions") as table:
        table.add_column(sa.Column("state", sa.String(16), nullable=False, server_default="stored"))
        table.add_column(sa.Column("queued_at", sa.Float, nullable=True))
        table.add_column(sa.Column("claim", sa.String(64), nullable=True))
        table.add_column(sa.Column("lease_until", sa.Float, nullable=True))
        table.add_column(sa.Column("attempts", sa.Integer, nullable=False, server_default="0"))
    op.create_index("submissions_by_state", "submissions", ["state", "queued_at"])
    op.create_index("submissions_by_student", "submissions", ["student_id", "submitted_at"])

    # scorecards: one per grading instead of one per submission.
    op.rename_table("scorecards", "scorecards_old")
    op.create_table(
        "scorecards",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("score", sa.Integer, nullable=False),
        sa.Column("max_score", sa.Integer, nullable=False),
        sa.Column("scorecard", sa.Text, nullable=False),
        sa.Column("graded_at", sa.Text, nullable=False),
    )
    op.execute("INSERT INTO scorecards (submission_id, status, score, max_score, scorecard, graded_at) "
               "SELECT submission_id, status, score, max_score, scorecard, graded_at FROM scorecards_old "
               "ORDER BY submission_id")
    op.drop_table("scorecards_old")
    op.create_index("scorecards_by_submission", "scorecards", ["submission_id", "id"])
    op.execute("UPDATE submissions SET state = 'graded' WHERE id IN (SELECT submission_id FROM scorecards)")

    op.create_table(
        "links",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("student_id", sa.String(64), sa.ForeignKey("students.id"), nullable=True),
        sa.Column("one_time", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("used_at", sa.Text, nullable=True),
        sa.Column("revoked_at", sa.Text, nullable=True),
    )
    op.create_table(
        "sessions",
        sa.Column("token_sha256", sa.String(64), primary_key=True),
        sa.Column("link_id", sa.Integer, sa.ForeignKey("links.id"), nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_table(
        "predictions",
        sa.Column("student_id", sa.String(64), sa.ForeignKey("students.id"), primary_key=True),
        sa.Column("exercise", sa.String(64), primary_key=True),
        sa.Column("choice", sa.Text, nullable=False),
        sa.Column("correct", sa.Boolean, nullable=False),
        sa.Column("answered_at", sa.Text, nullable=False),
    )
    settings = sa.table("settings", sa.column("key", sa.String), sa.column("value", sa.Text))
    op.bulk_insert(settings, [{"key": "session_key", "value": secrets.token_hex(32)}])


def downgrade() -> None:
    raise NotImplementedError("the service schema is not taken back: restore a copy of the store instead")
