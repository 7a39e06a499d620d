"""What an instructor decides in the dashboard beyond grading: an exercise's dates, late policy and
release (each change kept with who made it), and manual adjustments of a submission's points."""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "exercise_terms",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("exercise", sa.String(64), nullable=False),
        sa.Column("key", sa.String(32), nullable=False),
        sa.Column("value", sa.Text, nullable=False),  # JSON; null: back to exercise.toml's value
        sa.Column("changed_by", sa.Text, nullable=False),
        sa.Column("changed_at", sa.Text, nullable=False),
    )
    op.create_table(
        "adjustments",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("points", sa.Float, nullable=False),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("made_by", sa.Text, nullable=False),
        sa.Column("made_at", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("adjustments")
    op.drop_table("exercise_terms")
