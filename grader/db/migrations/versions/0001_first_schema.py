"""The first schema: students, their submissions and one scorecard per submission."""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "students",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.Text, nullable=False),
    )
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("student_id", sa.String(64), sa.ForeignKey("students.id"), nullable=False),
        sa.Column("exercise", sa.Text, nullable=False),
        sa.Column("tier", sa.String(16), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("filename", sa.Text, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("submitted_at", sa.Text, nullable=False),
        sa.UniqueConstraint("student_id", "exercise", "tier", "sha256"),
    )
    op.create_table(
        "scorecards",
        sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), primary_key=True,
                  autoincrement=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("score", sa.Integer, nullable=False),
        sa.Column("max_score", sa.Integer, nullable=False),
        sa.Column("scorecard", sa.Text, nullable=False),
        sa.Column("graded_at", sa.Text, nullable=False),
    )
    op.create_index("submissions_by_exercise", "submissions", ["exercise", "student_id"])


def downgrade() -> None:
    op.drop_table("scorecards")
    op.drop_table("submissions")
    op.drop_table("students")
