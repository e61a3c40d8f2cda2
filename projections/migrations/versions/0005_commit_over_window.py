"""commits say when the window guard could not fit the request; sessions their compaction

Generation 2 rules keep every head's request within ``window -
output_reserve``; where only what no rule may touch (pins, system prompts,
tool definitions) is left and it still does not fit, the commit records the
shortfall and why.  Commits made before have no such record (NULL), which
is what a rebuild writes for them too: their rules did not check.

Sessions gain ``compaction`` (``CompactionConfigured``: the instructions and
model their summaries are written with) and ``tools`` (``ToolsDeclared``);
commits name the declared tools in effect by a key into ``ctx_tool_sets``.
All NULL (none) for what came before.

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
    op.add_column("ctx_sessions", sa.Column("tools", sa.Text(), nullable=True))
    op.add_column("ctx_commits", sa.Column("tools", sa.String(length=32), nullable=True))
    op.create_table(
        "ctx_tool_sets",
        sa.Column("tools_key", sa.String(length=32), nullable=False),
        sa.Column("tools", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("tools_key"),
    )


def downgrade() -> None:
    op.drop_table("ctx_tool_sets")
    with op.batch_alter_table("ctx_commits") as batch:
        batch.drop_column("over_window")
        batch.drop_column("tools")
    with op.batch_alter_table("ctx_sessions") as batch:
        batch.drop_column("compaction")
        batch.drop_column("tools")
