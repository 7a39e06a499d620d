"""What a term in an LMS course needs kept: an adjustment belongs to a student's grade of an exercise (not
to one submission: a resubmission keeps it), a score sent to an LMS carries its note, a line item's maximum
as the platform was last told it, an LMS user's email, and the name of whom an instructor's sign-in link is
for (the change history names people).

Every adjustment made before is kept: it is given its submission's student and exercise, and the
submission it was made on stays recorded beside it."""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("adjustments") as batch:
        batch.add_column(sa.Column("student_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("exercise", sa.String(64), nullable=True))
        batch.alter_column("submission_id", existing_type=sa.Integer, nullable=True)
    op.execute("UPDATE adjustments SET student_id = (SELECT student_id FROM submissions "
               "WHERE submissions.id = adjustments.submission_id), exercise = (SELECT exercise FROM submissions "
               "WHERE submissions.id = adjustments.submission_id)")
    with op.batch_alter_table("adjustments") as batch:
        batch.alter_column("student_id", existing_type=sa.String(64), nullable=False)
        batch.alter_column("exercise", existing_type=sa.String(64), nullable=False)
    op.create_index("adjustments_grade", "adjustments", ["student_id", "exercise"])
    with op.batch_alter_table("lti_outbox") as batch:
        batch.add_column(sa.Column("comment", sa.Text, nullable=False, server_default=""))
    with op.batch_alter_table("lti_line_items") as batch:
        batch.add_column(sa.Column("score_maximum", sa.Float, nullable=True))
    with op.batch_alter_table("lti_users") as batch:
        batch.add_column(sa.Column("email", sa.Text, nullable=False, server_default=""))
    with op.batch_alter_table("links") as batch:
        batch.add_column(sa.Column("label", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("links") as batch:
        batch.drop_column("label")
    with op.batch_alter_table("lti_users") as batch:
        batch.drop_column("email")
    with op.batch_alter_table("lti_line_items") as batch:
        batch.drop_column("score_maximum")
    with op.batch_alter_table("lti_outbox") as batch:
        batch.drop_column("comment")
    op.drop_index("adjustments_grade", "adjustments")
    # An adjustment made on no submission (none since 0009 is) cannot go back: the old model needs one.
    op.execute("DELETE FROM adjustments WHERE submission_id IS NULL")
    with op.batch_alter_table("adjustments") as batch:
        batch.drop_column("exercise")
        batch.drop_column("student_id")
        batch.alter_column("submission_id", existing_type=sa.Integer, nullable=False)
