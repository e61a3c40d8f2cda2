"""large values compressed with lz4 on PostgreSQL

PostgreSQL compresses a large value when it stores it, with pglz unless told
otherwise, and an 8 MB event was compressed while its append held the events
table's EXCLUSIVE lock: every other writer waited for it.  lz4 (PostgreSQL
14 and later, when built with it) compresses several times faster for a
similar size.  It applies to values stored from now on; older ones stay as
they are and read the same.  The event store's ``state`` and the node rows'
``input`` and ``output`` are the columns that hold large texts.  SQLite has
no such setting: nothing happens there.

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COLUMNS = (("ctxstore_events", "state"), ("ctx_nodes", "input"), ("ctx_nodes", "output"))


def _set(method: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    offered = bind.execute(sa.text(
        "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"
    )).scalar()  # fmt: skip
    if not offered or "lz4" not in offered:
        return  # an older server, or one built without lz4: pglz as before
    tables = set(sa.inspect(bind).get_table_names())
    for table, column in COLUMNS:
        if table in tables:
            op.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {method}')


def upgrade() -> None:
    _set("lz4")


def downgrade() -> None:
    _set("default")
