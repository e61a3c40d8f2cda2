"""index the projection rows by notification id

A process reads the rows other processes wrote since its own position
(``Processor._load``: ``notification_id > position``) before every batch it
projects. Without an index each of those reads scanned the whole node and
commit tables, so two API processes appending in turn were slower together
than one alone.

Revision ID: 0008
Revises: 0006
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None

INDEXES = (
    ("ix_ctx_nodes_notification", "ctx_nodes"),
    ("ix_ctx_commits_notification", "ctx_commits"),
    ("ix_ctx_sessions_notification", "ctx_sessions"),
)


def upgrade() -> None:
    bind = op.get_bind()
    for name, table in INDEXES:
        have = {i["name"] for i in sa.inspect(bind).get_indexes(table)}
        if name not in have:
            op.create_index(name, table, ["notification_id"])


def downgrade() -> None:
    for name, table in INDEXES:
        op.drop_index(name, table_name=table)
