"""recall: every node's original content, searchable with the database's own full text

``ctx_recall`` holds one row per node with text: what the node said when it
was appended, whatever its item's state since (aged, cleared, summarized).
``GET /sessions/{sid}/recall`` searches it.  The full-text index is the
database's own and derived from ``text`` alone:

* SQLite: an FTS5 table ``ctx_recall_fts`` over ``ctx_recall`` (external
  content: it keeps no copy of the text, only its index), tokenizer
  ``porter unicode61`` so "researching" finds "research", kept by triggers,
  so every insert and delete of a row (a batch, a rebuild, an erasure, an
  online rebuild's switch) updates it in the same transaction.
* PostgreSQL: a GIN index over ``to_tsvector('english', ...)`` of the text with
  its punctuation made spaces: PostgreSQL's parser would otherwise keep a
  path, a host or a dotted name (``src/app/main.py``) as one token, where
  FTS5 and the query's terms (``domain.recall_query``) take their words.
  ``projections.recall.TSVECTOR`` spells the same expression, so the index
  serves the query.

Nodes stored before this revision get their rows here (``back_fill``), in
node order, exactly as the projection writes them (``projections.recall_rows``),
so an upgraded store recalls its old history and a rebuild gives the same rows.

Revision ID: 0013
Revises: 0012
"""
import json

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

SQLITE_INDEX = (
    "CREATE VIRTUAL TABLE ctx_recall_fts USING fts5(text, content='ctx_recall', "
    "content_rowid='notification_id', tokenize='porter unicode61')",
    "CREATE TRIGGER ctx_recall_ai AFTER INSERT ON ctx_recall BEGIN "
    "INSERT INTO ctx_recall_fts(rowid, text) VALUES (new.notification_id, new.text); END",
    "CREATE TRIGGER ctx_recall_ad AFTER DELETE ON ctx_recall BEGIN "
    "INSERT INTO ctx_recall_fts(ctx_recall_fts, rowid, text) "
    "VALUES ('delete', old.notification_id, old.text); END",
    "CREATE TRIGGER ctx_recall_au AFTER UPDATE ON ctx_recall BEGIN "
    "INSERT INTO ctx_recall_fts(ctx_recall_fts, rowid, text) "
    "VALUES ('delete', old.notification_id, old.text); "
    "INSERT INTO ctx_recall_fts(rowid, text) VALUES (new.notification_id, new.text); END",
)
TSVECTOR = "to_tsvector('english', regexp_replace(text, '[[:punct:]]+', ' ', 'g'))"
POSTGRES_INDEX = f"CREATE INDEX ix_ctx_recall_text ON ctx_recall USING gin (({TSVECTOR}))"
PAGE = 1000


def upgrade() -> None:
    bind = op.get_bind()
    if "ctx_recall" in sa.inspect(bind).get_table_names():
        return  # a store stamped back to an older revision and upgraded again
    op.create_table(
        "ctx_recall",
        sa.Column("notification_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  primary_key=True, autoincrement=False),
        sa.Column("session_id", sa.String(36), nullable=False),
        sa.Column("node_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
    )  # fmt: skip
    op.create_index("ix_ctx_recall_session", "ctx_recall", ["session_id", "seq"])
    for statement in SQLITE_INDEX if bind.dialect.name == "sqlite" else (POSTGRES_INDEX,):
        op.execute(statement)
    back_fill(bind)


def back_fill(bind: sa.Connection) -> None:
    """A row for every node already stored, a page at a time in node order."""
    from projections.packed_text import unpack
    from projections.recall_rows import recall_row_of

    nodes = sa.table("ctx_nodes", *(sa.column(n) for n in (
        "notification_id", "session_id", "node_id", "seq", "role", "name", "input", "output",
        "call_id")))  # fmt: skip
    recall = sa.table("ctx_recall", *(sa.column(n) for n in (
        "notification_id", "session_id", "node_id", "seq", "role", "text")))  # fmt: skip
    after = -1
    while True:
        page = bind.execute(sa.select(nodes).where(nodes.c.notification_id > after)
                            .order_by(nodes.c.notification_id).limit(PAGE)).all()  # fmt: skip
        if not page:
            return
        rows = [recall_row_of(r.notification_id, r.session_id, r.node_id, r.seq, r.role,
                              r.name, json.loads(unpack(r.input)), json.loads(unpack(r.output)))
                for r in page]  # fmt: skip
        found = [row for row in rows if row is not None]
        if found:
            bind.execute(recall.insert(), found)
        after = page[-1].notification_id


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for name in ("ctx_recall_ai", "ctx_recall_ad", "ctx_recall_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS ctx_recall_fts")
    op.drop_table("ctx_recall")
