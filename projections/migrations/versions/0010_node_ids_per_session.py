"""node ids are unique in their session: nodes are keyed by (session, node id)

* ``ctx_nodes`` gets the primary key ``(node_id, session_id)``: two sessions
  may both hold a ``call_0``.
* ``ctx_transitions.source_node_id`` may hold a node key
  (``<session>/<node id>``): an item a merge or an attach brought from
  another lineage names its node that way.

Commits that brought in another lineage's items now name them by key, so
rows written before would not digest equal to a rebuild: the projections
are cleared here and the processor rebuilds them from the event log on its
next catch-up (as revision 0002 did).  The events do not change.  The rules
history (``ctx_rules``) and the API keys are kept.

Revision ID: 0010
Revises: 0009
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

CLEARED = ("ctx_tracking", "ctx_sessions", "ctx_nodes", "ctx_commits", "ctx_transitions",
           "ctx_usage", "ctx_tool_sets")


def _clear() -> None:
    for table in CLEARED:
        op.execute(f"DELETE FROM {table}")


def _nodes_table(key: list[str]) -> None:
    """``ctx_nodes`` again, empty, with primary key ``key`` (a key cannot be altered in
    place on SQLite, and the table was just cleared)."""
    op.drop_table("ctx_nodes")
    op.create_table(
        "ctx_nodes",
        sa.Column("node_id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("input", sa.Text(), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("parent", sa.String(length=64), nullable=True),
        sa.Column("edge", sa.String(length=16), nullable=False),
        sa.Column("call_id", sa.String(length=64), nullable=True),
        sa.Column("reads", sa.Text(), nullable=False),
        sa.Column("meta", sa.Text(), nullable=False),
        sa.Column("sibling_of", sa.String(length=64), nullable=True),
        sa.Column("version_kind", sa.String(length=8), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("notification_id", sa.BigInteger(), nullable=False),
        sa.Column("token_counts", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(*key),
    )
    op.create_index("ix_ctx_nodes_session_seq", "ctx_nodes", ["session_id", "seq"], unique=True)
    op.create_index("ix_ctx_nodes_notification", "ctx_nodes", ["notification_id"])


def upgrade() -> None:
    _clear()
    _nodes_table(["node_id", "session_id"])
    with op.batch_alter_table("ctx_transitions") as batch:
        batch.alter_column("source_node_id", type_=sa.String(length=160),
                           existing_type=sa.String(length=64), existing_nullable=True)


def downgrade() -> None:
    _clear()  # rows the old code would write differ: it rebuilds them
    _nodes_table(["node_id"])
    with op.batch_alter_table("ctx_transitions") as batch:
        batch.alter_column("source_node_id", type_=sa.String(length=64),
                           existing_type=sa.String(length=160), existing_nullable=True)
