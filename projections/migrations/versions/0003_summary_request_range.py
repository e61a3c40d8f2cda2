"""summary requests stored as a range: the run's two ends and its length

A commit over the compaction threshold used to list every item id of the
run it wants folded (about 8 KB per commit, half of all commit rows by size
in a 10,000-node session, for as long as compaction did not run).  The run
is always a contiguous stretch of the commit's visible items, so its ends
and length name it exactly (``domain.rules.summarize.as_range``).

Rows are converted in place, each from its own content, to exactly what a
rebuild now writes, so live tables and a rebuild still digest equal.  The
conversion is spelled out here rather than imported, so this revision
keeps meaning what it meant when it was written.

Revision ID: 0003
Revises: 0002
"""
import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

PAGE = 1_000
commits = sa.table("ctx_commits", sa.column("commit_id", sa.String),
                   sa.column("summary_request", sa.Text))  # fmt: skip


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _as_range(request: dict[str, Any]) -> dict[str, Any]:
    ids = request["item_ids"]
    return {"first_item": ids[0], "last_item": ids[-1], "item_count": len(ids),
            "tokens": request["tokens"], "reason": request["reason"]}  # fmt: skip


def upgrade() -> None:
    conn = op.get_bind()
    after = ""
    while True:
        rows = conn.execute(
            sa.select(commits.c.commit_id, commits.c.summary_request)
            .where(commits.c.summary_request.is_not(None), commits.c.commit_id > after)
            .order_by(commits.c.commit_id).limit(PAGE)
        ).all()  # fmt: skip
        if not rows:
            break
        changed = []
        for commit_id, text in rows:
            request = json.loads(text)
            if "item_ids" in request:
                changed.append({"cid": commit_id, "body": _dumps(_as_range(request))})
        if changed:
            conn.execute(
                commits.update().where(commits.c.commit_id == sa.bindparam("cid"))
                .values(summary_request=sa.bindparam("body")), changed,
            )  # fmt: skip
        after = rows[-1][0]


def downgrade() -> None:
    # The old code reads range rows as malformed: clear the projections (not
    # the rules history) so it rebuilds them in its own form from the log.
    for table in ("ctx_tracking", "ctx_sessions", "ctx_nodes", "ctx_commits",
                  "ctx_transitions", "ctx_usage"):  # fmt: skip
        op.execute(f"DELETE FROM {table}")
