"""Recall's full-text index, kept without a copy of the text (issue 29, revision 0014).

A node's row in ``ctx_recall`` names it (session, node, order, role); the text
it stands for is the node's own (``projections.recall_rows.recall_text``),
which ``ctx_nodes`` already keeps, compressed.  A second, plain copy beside
the index cost SQLite as many bytes as the rest of the store.  So:

* SQLite: ``ctx_recall_fts`` is a contentless FTS5 table (``content=''``)
  whose rowid is the row's key.  It keeps the index and each row's length
  (``bm25`` needs no more), never the text.  Such a table cannot read back what
  it indexed, and removing an entry takes FTS5's ``delete`` command with the
  very text that was indexed: ``unindex`` computes it from the node rows before
  they go.  Every writer of ``ctx_recall`` goes through here in its own
  transaction: a batch (``write``), a rebuild's truncate (``clear``), an
  erasure (``unindex``), an online rebuild's switch (``switch``).
* PostgreSQL: ``tsv`` holds the row's ``tsvector`` (GIN-indexed), computed by
  the database from the text the writer sends, which is not stored.  It is
  about the size of the TOAST-compressed text it replaces (``bench_storage``,
  2 x 100 turns: 653 kB against 628 kB), so PostgreSQL's store is no smaller;
  what it gains is that ranking reads the vector instead of parsing each
  matching text again, and that no plain copy of the text is stored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, text

from projections.recall_rows import stored_text

FTS = "ctx_recall_fts"
SQLITE_FTS = (f"CREATE VIRTUAL TABLE {{schema}}{FTS} USING fts5(text, content='', "
              "tokenize='porter unicode61')")  # fmt: skip
# punctuation made spaces: PostgreSQL's parser would keep ``src/app/main.py`` one token
TSVECTOR = "to_tsvector('english', regexp_replace({}, '[[:punct:]]+', ' ', 'g'))"
_COLUMNS = ("notification_id", "session_id", "node_id", "seq", "role")
_POSTGRES_INSERT = (
    "INSERT INTO {table} (notification_id, session_id, node_id, seq, role, tsv) "
    f"SELECT n, s, i, q, r, {TSVECTOR.format('x')} FROM unnest(CAST(:n AS bigint[]), "
    "CAST(:s AS text[]), CAST(:i AS text[]), CAST(:q AS integer[]), CAST(:r AS text[]), "
    "CAST(:x AS text[])) AS rows (n, s, i, q, r, x)"
)
_NODE_TEXTS = ("SELECT r.notification_id, n.role, n.name, n.input, n.output "
               "FROM {schema}ctx_recall r JOIN {schema}ctx_nodes n "
               "ON n.notification_id = r.notification_id")  # fmt: skip
Texts = list[tuple[int, str]]  # (row key, indexed text)


def _prefix(schema: str | None) -> str:
    return f'"{schema}".' if schema else ""


def write(conn: Connection, schema: str | None, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (``projections.recall_rows``' dicts, text included) and index them."""
    if not rows:
        return
    at = _prefix(schema)
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(
            f"INSERT INTO {at}ctx_recall ({', '.join(_COLUMNS)}) VALUES (?, ?, ?, ?, ?)",
            [tuple(row[c] for c in _COLUMNS) for row in rows],
        )
        index(conn, schema, [(row["notification_id"], row["text"]) for row in rows])
        return
    columns = zip(*((*(row[c] for c in _COLUMNS), row["text"]) for row in rows), strict=True)
    conn.execute(text(_POSTGRES_INSERT.format(table=f"{at}ctx_recall")),
                 dict(zip("nsiqrx", (list(c) for c in columns), strict=True)))  # fmt: skip


def index(conn: Connection, schema: str | None, texts: Texts) -> None:
    """SQLite: add ``texts`` to the index under their row keys."""
    if texts:
        conn.exec_driver_sql(f"INSERT INTO {_prefix(schema)}{FTS}(rowid, text) VALUES (?, ?)",
                             texts)  # fmt: skip


def _forget(conn: Connection, schema: str | None, texts: Texts) -> None:
    """SQLite: remove ``texts`` from the index (each exactly as it was indexed)."""
    if texts:
        conn.exec_driver_sql(f"INSERT INTO {_prefix(schema)}{FTS}({FTS}, rowid, text) "
                             "VALUES ('delete', ?, ?)", texts)  # fmt: skip


def node_texts(conn: Connection, schema: str | None, where: str = "",
               params: dict[str, Any] | None = None) -> Texts:  # fmt: skip
    """The indexed text of each recall row (``where``: of some), from its node's row."""
    query = text(_NODE_TEXTS.format(schema=_prefix(schema)) + where)
    if params and "ids" in params:
        query = query.bindparams(bindparam("ids", expanding=True))
    return [(int(r.notification_id), stored_text(r.role, r.name, r.input, r.output))
            for r in conn.execute(query, params or {})]  # fmt: skip


def unindex(conn: Connection, session_ids: Iterable[str]) -> list[int]:
    """SQLite: take the recall rows of ``session_ids`` out of the index; call it before
    deleting them, while their nodes' rows still stand.  Their keys, for ``settle``."""
    ids = list(session_ids)
    if conn.dialect.name != "sqlite" or not ids:
        return []
    texts = node_texts(conn, None, " WHERE r.session_id IN :ids", {"ids": ids})
    _forget(conn, None, texts)
    return [key for key, _ in texts]


def settle(conn: Connection, gone: list[int]) -> None:
    """SQLite, after an erasure deleted the rows ``gone``: merge the index's segments, so
    that no erased word stays on disk even marked deleted, then make sure none of
    ``gone`` is indexed still.  One would be if a node's text were computed otherwise now
    than when it was indexed (FTS5 then removes other words than it holds): the index is
    made again from the rows that remain.  A scan of the index, cheaper than the
    ``VACUUM`` of the whole file an erasure runs next."""
    if conn.dialect.name != "sqlite":
        return
    conn.exec_driver_sql(f"INSERT INTO {FTS}({FTS}) VALUES ('optimize')")
    if not gone:
        return
    vocab = _vocab(conn, None)
    left = conn.exec_driver_sql(f"SELECT 1 FROM {vocab} WHERE doc IN (SELECT value FROM "
                                "json_each(?)) LIMIT 1", (json.dumps(gone),)).first()  # fmt: skip
    if left is not None:
        clear(conn)
        index(conn, None, node_texts(conn, None))
        conn.exec_driver_sql(f"INSERT INTO {FTS}({FTS}) VALUES ('optimize')")


def clear(conn: Connection) -> None:
    """SQLite: empty the index (every recall row is being deleted)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"INSERT INTO {FTS}({FTS}) VALUES ('delete-all')")


def switch(conn: Connection, live: str, shadow: str) -> tuple[Texts, Texts]:
    """SQLite, before an online rebuild replaces ``live``'s rows by ``shadow``'s: what
    ``live``'s index must drop and add so that it indexes the shadow's rows.  A row
    changed if its node did; when the rebuild was identical, nothing did."""
    key = ("SELECT r.notification_id, r.session_id, n.node_id, n.role, n.name, n.input, "
           "n.output FROM {s}.ctx_recall r JOIN {s}.ctx_nodes n "
           "ON n.notification_id = r.notification_id")  # fmt: skip
    changes = []
    for old, new in ((live, shadow), (shadow, live)):
        query = f"{key.format(s=old)} EXCEPT {key.format(s=new)}"
        changes.append([(int(r.notification_id), stored_text(r.role, r.name, r.input, r.output))
                        for r in conn.execute(text(query))])  # fmt: skip
    return changes[0], changes[1]


def switched(conn: Connection, live: str, changes: tuple[Texts, Texts]) -> None:
    """Apply ``switch``'s changes to ``live``'s index."""
    stale, fresh = changes
    _forget(conn, live, stale)
    index(conn, live, fresh)


def _vocab(conn: Connection, schema: str | None) -> str:
    """A temporary ``fts5vocab`` table over ``schema``'s index: each term's every instance."""
    vocab = f"temp.ctx_recall_terms_{schema or 'main'}"
    conn.exec_driver_sql(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING "
                         f"fts5vocab({schema or 'main'}, {FTS}, instance)")  # fmt: skip
    return vocab


def fts_digest(conn: Connection, schema: str | None = None) -> str:
    """SQLite: a digest of what the index holds, every term's every position in every row,
    whatever its segments' layout (a store indexed in one go, or batch by batch)."""
    vocab = _vocab(conn, schema)
    h = hashlib.sha256()
    for term, doc, offset in conn.exec_driver_sql(
        f"SELECT term, doc, offset FROM {vocab} ORDER BY term, doc, offset"
    ):
        h.update(f"{term}\t{doc}\t{offset}\n".encode())
    return h.hexdigest()
