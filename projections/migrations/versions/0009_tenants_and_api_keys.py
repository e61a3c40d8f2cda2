"""sessions name their tenant; API keys get a table of their own

``ctx_sessions.tenant`` is the tenant ``SessionStarted`` v2 records.  Every
row already there was written from a v1 event, whose upcast gives the
default tenant, so the column's default fills them in place: live tables
and a rebuild still digest equal, with no replay.

``ctx_api_keys`` is NOT a projection of events: keys are created and revoked
by the ``ctxstore keys`` command, never by an event, so no rebuild could
recreate them.  It is outside ``projections.tables.PROJECTION_TABLES``, so
``rebuild`` neither empties nor digests it (``service.api_keys``).

Revision ID: 0009
Revises: 0008
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    # A store stamped back to an older revision and upgraded again already has them.
    if "tenant" not in {c["name"] for c in inspector.get_columns("ctx_sessions")}:
        with op.batch_alter_table("ctx_sessions") as batch:
            batch.add_column(sa.Column("tenant", sa.String(length=64), nullable=False,
                                       server_default="default"))
    if "ctx_api_keys" not in inspector.get_table_names():
        op.create_table(
            "ctx_api_keys",
            sa.Column("key_id", sa.String(length=32), primary_key=True),
            sa.Column("tenant", sa.String(length=64), nullable=False),
            sa.Column("scope", sa.String(length=8), nullable=False),
            sa.Column("secret_hash", sa.String(length=64), nullable=False, unique=True),
            sa.Column("created_at", sa.Float(), nullable=False),
            sa.Column("revoked_at", sa.Float()),
        )


def downgrade() -> None:
    op.drop_table("ctx_api_keys")
    with op.batch_alter_table("ctx_sessions") as batch:
        batch.drop_column("tenant")
