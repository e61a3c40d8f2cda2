"""recall without a copy of the text: its index alone, the text read from the node

Revision 0013 kept each node's text twice, compressed in ``ctx_nodes`` and
plain in ``ctx_recall.text`` beside the full-text index, which nearly doubled
a SQLite store (issue 29: 30.0 kB a turn against 16.5 kB without it).  Here
the plain copy goes (``projections.recall_index`` says how the index is kept
and read without it):

* SQLite: the external-content FTS5 table and its triggers give way to a
  contentless FTS5 table under the same name, filled from the old rows' text
  before the column is dropped.  ``ALTER TABLE ... DROP COLUMN`` frees the
  pages; a ``VACUUM`` returns them to the file system.
* PostgreSQL: ``tsv``, the ``tsvector`` the old GIN index was built on, now
  stored and indexed, and the text dropped.

``downgrade`` puts the text back from the nodes' rows and revision 0013's
indexes with it.

Revision ID: 0014
Revises: 0013
"""
import importlib.util
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

TSVECTOR = "to_tsvector('english', regexp_replace(text, '[[:punct:]]+', ' ', 'g'))"
TRIGGERS = ("ctx_recall_ai", "ctx_recall_ad", "ctx_recall_au")
PAGE = 1000


def upgrade() -> None:
    from projections.recall_index import SQLITE_FTS

    bind = op.get_bind()
    columns = {c["name"] for c in sa.inspect(bind).get_columns("ctx_recall")}
    if "text" not in columns:
        return  # a store stamped back to an older revision and upgraded again
    if bind.dialect.name == "sqlite":
        for name in TRIGGERS:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS ctx_recall_fts")
        op.execute(SQLITE_FTS.format(schema=""))
        op.execute("INSERT INTO ctx_recall_fts(rowid, text) "
                   "SELECT notification_id, text FROM ctx_recall ORDER BY notification_id")  # fmt: skip
        op.execute("ALTER TABLE ctx_recall DROP COLUMN text")
        op.execute("ALTER TABLE ctx_recall ADD COLUMN tsv TEXT")
        return
    op.execute("ALTER TABLE ctx_recall ADD COLUMN tsv tsvector")
    op.execute(f"UPDATE ctx_recall SET tsv = {TSVECTOR}")
    op.execute("DROP INDEX IF EXISTS ix_ctx_recall_text")
    op.execute("CREATE INDEX ix_ctx_recall_tsv ON ctx_recall USING gin (tsv)")
    op.execute("ALTER TABLE ctx_recall DROP COLUMN text")


def downgrade() -> None:
    from projections.recall_index import node_texts

    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    op.execute("ALTER TABLE ctx_recall ADD COLUMN text TEXT NOT NULL DEFAULT ''")
    texts = node_texts(bind, None)
    update = sa.text("UPDATE ctx_recall SET text = :text WHERE notification_id = :id")
    for start in range(0, len(texts), PAGE):
        bind.execute(update, [{"id": i, "text": x} for i, x in texts[start : start + PAGE]])
    if sqlite:
        op.execute("DROP TABLE IF EXISTS ctx_recall_fts")
        op.execute("ALTER TABLE ctx_recall DROP COLUMN tsv")
        for statement in _revision_0013().SQLITE_INDEX:
            op.execute(statement)
        op.execute("INSERT INTO ctx_recall_fts(ctx_recall_fts) VALUES ('rebuild')")
        return
    op.execute("ALTER TABLE ctx_recall DROP COLUMN tsv")
    op.execute(f"CREATE INDEX ix_ctx_recall_text ON ctx_recall USING gin (({TSVECTOR}))")


def _revision_0013() -> ModuleType:
    """Revision 0013's module (its file name is no module name): its index statements."""
    spec = importlib.util.spec_from_file_location("_0013", Path(__file__).with_name("0013_recall.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
