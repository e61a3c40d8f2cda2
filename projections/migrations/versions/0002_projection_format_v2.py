"""projection format 2: items stored by reference, recorded token counts

* Commit rows omit an item's ``rendered`` and ``call`` when they equal its
  source node's own text (``projections/item_rows.py``).
* ``ctx_nodes.token_counts`` keeps the counts ``NodeAppended`` v3 records.

Older rows would still load, but a rebuild writes the new form and its
digest could not match them, so the projections are cleared here and the
processor rebuilds them from the event log on its next catch-up.  The rules
history (``ctx_rules``) is kept: it decides which rules applied when.

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Every projection table; ctx_rules is history and stays.
CLEARED = ("ctx_tracking", "ctx_sessions", "ctx_nodes", "ctx_commits", "ctx_transitions",
           "ctx_usage")


def _clear() -> None:
    for table in CLEARED:
        op.execute(f"DELETE FROM {table}")


def upgrade() -> None:
    _clear()
    op.add_column("ctx_nodes", sa.Column("token_counts", sa.Text(), nullable=True))


def downgrade() -> None:
    _clear()  # rows the old code would write differ: it rebuilds them
    with op.batch_alter_table("ctx_nodes") as batch:
        batch.drop_column("token_counts")
