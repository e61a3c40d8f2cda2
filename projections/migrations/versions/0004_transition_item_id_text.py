"""transition item ids as unbounded text

An item copied in by an attach carries the attach node's id as a prefix,
and an attach of a session that itself holds attached items prefixes again,
so item ids grow with each level of nesting.  ``varchar(160)`` overflowed
on PostgreSQL after four levels, failing the projection on an event that
was already stored.  SQLite never enforced the length; batch mode gives
both stores the same declared type.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ctx_transitions") as table:
        table.alter_column("item_id", type_=sa.Text(), existing_type=sa.String(160),
                           existing_nullable=False)  # fmt: skip


def downgrade() -> None:
    with op.batch_alter_table("ctx_transitions") as table:
        table.alter_column("item_id", type_=sa.String(160), existing_type=sa.Text(),
                           existing_nullable=False)  # fmt: skip
