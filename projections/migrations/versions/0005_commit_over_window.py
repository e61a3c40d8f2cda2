"""commits say when the window guard could not fit the request; sessions their compaction

Generation 2 rules keep every head's request within ``window -
output_reserve``; where only what no rule may touch (pins, system prompts,
tool definitions) is left and it still does not fit, the commit records the
shortfall and why.  Commits made before have no such record (NULL), which
is what a rebuild writes for them too: their rules did not check.

Sessions gain ``compaction`` (``CompactionConfigured``: the instructions and
model their summaries are written with); NULL until one is configured.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ctx_commits", sa.Column("over_window", sa.Text(), nullable=True))
    op.add_column("ctx_sessions", sa.Column("compaction", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ctx_commits") as batch:
        batch.drop_column("over_window")
    with op.batch_alter_table("ctx_sessions") as batch:
        batch.drop_column("compaction")
