"""Teaching assistants (their own sign-in links, from the roster or an LMS launch) and grade inquiries: a
student's question about a released grade, its thread of answers, and whether it is open or resolved."""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "teaching_assistants",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.Text, nullable=False),
    )
    with op.batch_alter_table("links") as links:
        links.add_column(sa.Column("ta_id", sa.String(64), sa.ForeignKey("teaching_assistants.id",
                                                                          name="fk_links_ta_id"), nullable=True))
    with op.batch_alter_table("lti_users") as users:
        users.add_column(sa.Column("ta_id", sa.String(64), sa.ForeignKey("teaching_assistants.id",
                                                                          name="fk_lti_users_ta_id"), nullable=True))
    op.create_table(
        "inquiries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.Integer, sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("student_id", sa.String(64), sa.ForeignKey("students.id"), nullable=False),
        sa.Column("exercise", sa.String(64), nullable=False),
        sa.Column("test_id", sa.Text, nullable=False, server_default=""),  # "" : the whole submission
        sa.Column("test_name", sa.Text, nullable=False, server_default=""),
        sa.Column("state", sa.String(16), nullable=False),  # open | resolved
        sa.Column("opened_at", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
    )
    op.create_index("ix_inquiries_student_id", "inquiries", ["student_id"])
    op.create_table(
        "inquiry_posts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("inquiry_id", sa.Integer, sa.ForeignKey("inquiries.id"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),  # message | resolved | reopened | regrade
        sa.Column("role", sa.String(16), nullable=False),  # student | ta | instructor
        sa.Column("author", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False, server_default=""),
        sa.Column("posted_at", sa.Text, nullable=False),
    )
    op.create_index("ix_inquiry_posts_inquiry_id", "inquiry_posts", ["inquiry_id"])


def downgrade() -> None:
    op.drop_index("ix_inquiry_posts_inquiry_id", "inquiry_posts")
    op.drop_table("inquiry_posts")
    op.drop_index("ix_inquiries_student_id", "inquiries")
    op.drop_table("inquiries")
    with op.batch_alter_table("lti_users") as users:
        users.drop_column("ta_id")
    with op.batch_alter_table("links") as links:
        links.drop_column("ta_id")
    op.drop_table("teaching_assistants")
