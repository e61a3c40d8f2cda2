"""items keep a rewritten text as a splice of their node's: projections rebuilt

A capped tool result keeps both ends of its node's text, and commit rows
stored that rewrite in full: the node's text a second time, about a sixth of
the commit rows (issue 29).  They now store it as a splice of the node's own
text (``projections.item_rows.splice``).  Older rows still load, but a
rebuild writes the new form and its digest could not match them, so the
projections are emptied here and the processor rebuilds them from the event
log on its next catch-up, as revisions 0002 and 0010 did.  The events do not
change; the rules history (``ctx_rules``), the API keys and the partition
count the tracking rows store are kept (their positions go back to 0).

Revision ID: 0015
Revises: 0014
"""
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# The projection tables at this revision; the tracking rows stay, rewound.
EMPTIED = ("ctx_recall", "ctx_tool_sets", "ctx_usage", "ctx_transitions", "ctx_commits",
           "ctx_nodes", "ctx_sessions")


def _rewind() -> None:
    if op.get_bind().dialect.name == "sqlite":  # contentless FTS5: its own way to empty it
        op.execute("INSERT INTO ctx_recall_fts(ctx_recall_fts) VALUES ('delete-all')")
        for table in EMPTIED:
            op.execute(f"DELETE FROM {table}")
    else:
        op.execute(f"TRUNCATE {', '.join(EMPTIED)}")
    op.execute("UPDATE ctx_tracking SET notification_id = 0")


def upgrade() -> None:
    _rewind()


def downgrade() -> None:
    _rewind()  # rows the old code would write differ: it rebuilds them
