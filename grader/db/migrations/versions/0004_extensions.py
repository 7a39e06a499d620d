"""Per-student extensions of an exercise's due date, given from the instructor's dashboard."""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "extensions",
        sa.Column("student_id", sa.String(64), sa.ForeignKey("students.id"), primary_key=True),
        sa.Column("exercise", sa.String(64), primary_key=True),
        sa.Column("due", sa.Text, nullable=False),  # ISO 8601 with its zone
        sa.Column("granted_at", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("extensions")
