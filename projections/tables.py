"""Projection tables (SQLAlchemy Core).  Alembic migrations create them.

Every row carries the notification id of the event that last wrote it, so a
second process can bring its in-memory indexes up to date by reading only
the rows newer than its own tracking position.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import TSVECTOR

metadata = MetaData()

tracking = Table(
    "ctx_tracking",
    metadata,
    Column("application_name", String(64), primary_key=True),
    Column("partition", Integer, primary_key=True, server_default="0"),  # revision 0011
    Column("notification_id", BigInteger, nullable=False),
    Column("partitions", Integer, nullable=False, server_default="1"),  # P, the same in every row
)

rules = Table(
    "ctx_rules",
    metadata,
    Column("from_position", BigInteger, primary_key=True),
    Column("rules_version", String(32), nullable=False),
    Column("policy", Text, nullable=False),
)

sessions = Table(
    "ctx_sessions",
    metadata,
    Column("session_id", String(36), primary_key=True),
    Column("title", Text, nullable=False),
    Column("model", String(128), nullable=False),
    Column("context_window", Integer),
    Column("head", String(64)),
    Column("running", String(64)),
    Column("pinned", Text, nullable=False),  # JSON list
    Column("branched_from", Text),  # JSON {session_id, node_id}
    Column("version", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("graph_position", BigInteger, nullable=False),  # last event that changed the graph
    Column("notification_id", BigInteger, nullable=False),
    Column("compaction", Text),  # JSON: the session's summarizer instructions and model
    Column("tools", Text),  # JSON: the tools it declared last
    Column("tenant", String(64), nullable=False, server_default="default"),  # revision 0009
    Column("partition", Integer, nullable=False, server_default="0"),  # revision 0011
    Index("ix_ctx_sessions_notification", "notification_id"),
)

# A node id is unique in its session only (revision 0010): the key is both.
nodes = Table(
    "ctx_nodes",
    metadata,
    Column("node_id", String(64), primary_key=True),
    Column("session_id", String(36), primary_key=True),
    Column("seq", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    Column("name", Text),
    Column("input", Text),  # JSON
    Column("output", Text),  # JSON
    Column("parent", String(64)),
    Column("edge", String(16), nullable=False),
    Column("call_id", String(64)),
    Column("reads", Text, nullable=False),  # JSON list
    Column("meta", Text, nullable=False),  # JSON: metadata, attach/merge details
    Column("sibling_of", String(64)),
    Column("version_kind", String(8)),
    Column("created_at", Float, nullable=False),
    Column("event_id", String(64), nullable=False),
    Column("notification_id", BigInteger, nullable=False),
    Column("token_counts", Text),  # JSON: what NodeAppended v3 recorded
    Index("ix_ctx_nodes_session_seq", "session_id", "seq", unique=True),
    Index("ix_ctx_nodes_notification", "notification_id"),
)

commits = Table(
    "ctx_commits",
    metadata,
    Column("commit_id", String(32), primary_key=True),
    Column("session_id", String(36), nullable=False),
    Column("parent_ids", Text, nullable=False),  # JSON list
    Column("head_node_id", String(64), nullable=False),
    Column("rules_version", String(32), nullable=False),
    Column("total_tokens", Integer, nullable=False),
    Column("event_id", String(64), nullable=False),
    Column("event_seq", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("checkpoint_id", String(32), nullable=False),
    Column("delta_count", Integer, nullable=False),
    Column("is_checkpoint", Boolean, nullable=False),
    Column("items", Text, nullable=False),  # JSON: full list at checkpoints, else a delta
    Column("summary_request", Text),
    Column("counts", Text, nullable=False),
    Column("notification_id", BigInteger, nullable=False),
    Column("over_window", Text),  # JSON: the window guard's shortfall, when it could not fit
    Column("tools", String(32)),  # the declared tools in effect (ctx_tool_sets), if any
    Index("ix_ctx_commits_checkpoint", "checkpoint_id"),
    Index("ix_ctx_commits_session", "session_id", "notification_id"),
    Index("ix_ctx_commits_notification", "notification_id"),
)

transitions = Table(
    "ctx_transitions",
    metadata,
    Column("notification_id", BigInteger, primary_key=True),
    Column("ordinal", Integer, primary_key=True),
    Column("session_id", String(36), nullable=False),
    Column("commit_id", String(32), nullable=False),
    Column("item_id", Text, nullable=False),  # nested attaches prefix ids: unbounded
    Column("source_node_id", String(160)),  # an id, or another lineage's node key (0010)
    Column("from_state", String(16), nullable=False),
    Column("to_state", String(16), nullable=False),
    Column("rule", String(32), nullable=False),
    Column("rules_version", String(32), nullable=False),
    Column("event_id", String(64), nullable=False),
    Column("event_seq", Integer, nullable=False),
    Column("inputs", Text, nullable=False),
    Index("ix_ctx_transitions_node", "session_id", "source_node_id"),
)

usage = Table(
    "ctx_usage",
    metadata,
    Column("notification_id", BigInteger, primary_key=True),
    Column("session_id", String(36), nullable=False),
    Column("request_id", String(128), nullable=False),
    Column("head_node", String(64), nullable=False),
    Column("input_tokens", Integer, nullable=False),
    Column("cache_read", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("provider", String(64), nullable=False),
    Column("event_seq", Integer, nullable=False),
    # UsageMeasured v2 (revision 0006): the provider's object as given, the
    # convention that read it, and the prompt's total in that convention.
    Column("cache_creation", Integer, nullable=False, server_default="0"),
    Column("total_input", BigInteger, nullable=False, server_default="0"),
    Column("convention", String(16), nullable=False, server_default="flat"),
    Column("native", Text),
    Index("ix_ctx_usage_session", "session_id", "notification_id"),
)

tool_sets = Table(
    "ctx_tool_sets",
    metadata,
    Column("tools_key", String(32), primary_key=True),  # a digest of the tools' JSON
    Column("tools", Text, nullable=False),
)

# What recall searches (revisions 0013, 0014): a row per node with text, whatever its item's
# state.  The key is the node's event (one event adds one node): on SQLite it is the rowid
# the FTS5 index ``ctx_recall_fts`` names rows by, so it must survive a VACUUM unchanged.
# No copy of the text: it is the node's (``projections.recall_index``).  The full-text
# indexes themselves (FTS5, a GIN over ``tsv``) exist only in the migrations.
recall = Table(
    "ctx_recall",
    metadata,
    Column(
        "notification_id",
        BigInteger().with_variant(Integer(), "sqlite"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("session_id", String(36), nullable=False),
    Column("node_id", String(64), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    # PostgreSQL: the text's ``tsvector`` (revision 0014); SQLite's index is FTS5's, so NULL
    Column("tsv", Text().with_variant(TSVECTOR(), "postgresql")),
    Index("ix_ctx_recall_session", "session_id", "seq"),
)

# Which worker projects which partition, until when (revision 0011).  Not a
# projection of events: a rebuild neither empties nor digests it.
leases = Table(
    "ctx_leases",
    metadata,
    Column("partition", Integer, primary_key=True),  # -1: present, holding any or none
    Column("owner", String(64), primary_key=True),
    Column("expires_at", Float, nullable=False),  # seconds since the epoch
)

# Everything a rebuild drops and recomputes (ctx_rules is history, kept).
PROJECTION_TABLES = (tracking, sessions, nodes, commits, transitions, usage, tool_sets, recall)
