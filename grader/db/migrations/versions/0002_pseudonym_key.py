"""A per-store secret for pseudonyms that stay stable from one publication to the next."""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    settings = op.create_table(
        "settings",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.bulk_insert(settings, [{"key": "pseudonym_key", "value": secrets.token_hex(16)}])


def downgrade() -> None:
    op.drop_table("settings")
