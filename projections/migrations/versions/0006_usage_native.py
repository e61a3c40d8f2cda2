"""usage rows keep the provider's own fields and the prompt's total

``UsageMeasured`` v2 records the provider's usage object as given, the
convention it was read by, ``cache_creation``, and ``total_input`` (the
prompt the request occupied, counted the way that provider counts it).
Occupancy reads ``total_input``.  Rows written from v1 events get exactly
what their upcast gives (``input_tokens + cache_read``, flat, no cache
creation, nothing native), so live tables and a rebuild still digest equal,
with no replay.

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


COLUMNS = (
    ("cache_creation", sa.Integer(), "0"),
    ("total_input", sa.BigInteger(), "0"),
    ("convention", sa.String(length=16), "flat"),
    ("native", sa.Text(), None),
)


def upgrade() -> None:
    # A store stamped back to an older revision and upgraded again already has them.
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("ctx_usage")}
    missing = [c for c in COLUMNS if c[0] not in have]
    if not missing:
        return
    with op.batch_alter_table("ctx_usage") as batch:
        for name, type_, default in missing:
            batch.add_column(sa.Column(name, type_, nullable=default is None,
                                       server_default=default))
    if "total_input" not in have:
        op.execute("UPDATE ctx_usage SET total_input = input_tokens + cache_read")


def downgrade() -> None:
    with op.batch_alter_table("ctx_usage") as batch:
        batch.drop_column("native")
        batch.drop_column("convention")
        batch.drop_column("total_input")
        batch.drop_column("cache_creation")
