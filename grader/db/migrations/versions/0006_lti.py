"""LTI 1.3: the platforms (LMSs) registered, their deployments, the nonces of logins, LMS users as students
or instructors, courses, line items, and the outbox of scores on their way to the platforms' gradebooks."""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lti_platforms",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("issuer", sa.Text, nullable=False),
        sa.Column("client_id", sa.Text, nullable=False),
        sa.Column("auth_login_url", sa.Text, nullable=False),
        sa.Column("auth_token_url", sa.Text, nullable=False),
        sa.Column("keyset_url", sa.Text, nullable=False),
        sa.Column("tier", sa.String(16), nullable=False, server_default="free"),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.UniqueConstraint("issuer", "client_id"),
    )
    op.create_table(
        "lti_deployments",
        sa.Column("platform_id", sa.Integer, sa.ForeignKey("lti_platforms.id"), primary_key=True),
        sa.Column("deployment_id", sa.String(255), primary_key=True),
    )
    op.create_table(
        "lti_nonces",
        sa.Column("nonce", sa.String(64), primary_key=True),
        sa.Column("state", sa.String(64), nullable=False),
        sa.Column("platform_id", sa.Integer, sa.ForeignKey("lti_platforms.id"), nullable=False),
        sa.Column("issued_at", sa.Float, nullable=False),
        sa.Column("used_at", sa.Float, nullable=True),
    )
    op.create_table(
        "lti_users",
        sa.Column("platform_id", sa.Integer, sa.ForeignKey("lti_platforms.id"), primary_key=True),
        sa.Column("sub", sa.String(255), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),  # instructor | student
        sa.Column("student_id", sa.String(64), sa.ForeignKey("students.id"), nullable=True),
        sa.Column("link_id", sa.Integer, sa.ForeignKey("links.id"), nullable=True),
        sa.Column("name", sa.Text, nullable=False, server_default=""),
    )
    op.create_table(
        "lti_contexts",
        sa.Column("platform_id", sa.Integer, sa.ForeignKey("lti_platforms.id"), primary_key=True),
        sa.Column("context_id", sa.String(255), primary_key=True),
        sa.Column("title", sa.Text, nullable=False, server_default=""),
        sa.Column("memberships_url", sa.Text, nullable=True),
        sa.Column("updated_at", sa.Text, nullable=False),
    )
    op.create_table(
        "lti_members",
        sa.Column("platform_id", sa.Integer, sa.ForeignKey("lti_platforms.id"), primary_key=True),
        sa.Column("context_id", sa.String(255), primary_key=True),
        sa.Column("sub", sa.String(255), primary_key=True),
    )
    op.create_table(
        "lti_line_items",
        sa.Column("platform_id", sa.Integer, sa.ForeignKey("lti_platforms.id"), primary_key=True),
        sa.Column("context_id", sa.String(255), primary_key=True),
        sa.Column("exercise", sa.String(64), primary_key=True),
        sa.Column("lineitem", sa.Text, nullable=False),
        sa.Column("scopes", sa.Text, nullable=False, server_default=""),
        sa.Column("updated_at", sa.Text, nullable=False),
    )
    op.create_table(
        "lti_outbox",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("platform_id", sa.Integer, sa.ForeignKey("lti_platforms.id"), nullable=False),
        sa.Column("lineitem", sa.Text, nullable=False),
        sa.Column("sub", sa.String(255), nullable=False),
        sa.Column("student_id", sa.String(64), nullable=False),
        sa.Column("exercise", sa.String(64), nullable=False),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("max_score", sa.Float, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),  # pending | sent
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_try", sa.Float, nullable=False),
        sa.Column("last_error", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("sent_at", sa.Text, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("lti_outbox")
    op.drop_table("lti_line_items")
    op.drop_table("lti_members")
    op.drop_table("lti_contexts")
    op.drop_table("lti_users")
    op.drop_table("lti_nonces")
    op.drop_table("lti_deployments")
    op.drop_table("lti_platforms")
