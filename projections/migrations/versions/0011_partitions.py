"""projection tracking per partition

``ctx_tracking`` gets one row per partition (``partition`` joins the
primary key) and stores the partition count ``P`` in every row;
``ctx_sessions.partition`` says which partition projects a session.  The
existing single row becomes partition 0 of P=1 and every session is in
partition 0, which is what a rebuild with P=1 writes: live tables and a
rebuild still digest equal, with no replay.  Another P takes a rebuild.
``ctx_leases`` says which ``ctxstore worker`` projects which partition.

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if "partition" not in {c["name"] for c in inspector.get_columns("ctx_sessions")}:
        with op.batch_alter_table("ctx_sessions") as batch:
            batch.add_column(sa.Column("partition", sa.Integer(), nullable=False,
                                       server_default="0"))
    if "ctx_leases" not in inspector.get_table_names():
        op.create_table(
            "ctx_leases",
            sa.Column("partition", sa.Integer(), primary_key=True),
            sa.Column("owner", sa.String(length=64), primary_key=True),
            sa.Column("expires_at", sa.Float(), nullable=False),
        )
    if "partition" in {c["name"] for c in inspector.get_columns("ctx_tracking")}:
        return  # a store stamped back and upgraded again
    # A new table, copied and renamed: the primary key changes, which SQLite
    # cannot alter in place.
    op.create_table(
        "ctx_tracking_new",
        sa.Column("application_name", sa.String(length=64), primary_key=True),
        sa.Column("partition", sa.Integer(), primary_key=True, server_default="0"),
        sa.Column("notification_id", sa.BigInteger(), nullable=False),
        sa.Column("partitions", sa.Integer(), nullable=False, server_default="1"),
    )
    op.execute("INSERT INTO ctx_tracking_new (application_name, partition, notification_id,"
               " partitions) SELECT application_name, 0, notification_id, 1 FROM ctx_tracking")
    op.drop_table("ctx_tracking")
    op.rename_table("ctx_tracking_new", "ctx_tracking")


def downgrade() -> None:
    op.drop_table("ctx_leases")
    op.create_table(
        "ctx_tracking_old",
        sa.Column("application_name", sa.String(length=64), primary_key=True),
        sa.Column("notification_id", sa.BigInteger(), nullable=False),
    )
    # Below this revision one row is the position: the one every partition passed.
    op.execute("INSERT INTO ctx_tracking_old (application_name, notification_id)"
               " SELECT application_name, MIN(notification_id) FROM ctx_tracking"
               " GROUP BY application_name")
    op.drop_table("ctx_tracking")
    op.rename_table("ctx_tracking_old", "ctx_tracking")
    with op.batch_alter_table("ctx_sessions") as batch:
        batch.drop_column("partition")
