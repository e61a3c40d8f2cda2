"""The metrics themselves (``prometheus_client``), made when this module is first imported.

Labels are bounded: route templates (``/sessions/{sid}/nodes``, never a
path), command and rule names, status codes and error codes, partitions.
Never a session id, a tenant or any content.  In multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR``) each process writes its own files and
``telemetry.exposition`` sums them; a gauge then says how processes combine.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SHARE = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.25, 1.5, 2.0)

HTTP_DURATION = Histogram(
    "ctxstore_http_request_duration_seconds",
    "HTTP requests by route template, method and status: time to the last body byte",
    ["route", "method", "status"], buckets=SECONDS,
)  # fmt: skip
COMMANDS = Counter(
    "ctxstore_commands_total",
    "Commands (POST/DELETE routes) by type and outcome: stored, replayed (an "
    "Idempotency-Key's earlier answer), refused (code: the error's machine code), failed",
    ["command", "outcome", "code"],
)  # fmt: skip
APPEND_WAIT = Histogram(
    "ctxstore_command_wait_seconds",
    "Time a stored command spent in each stage: event_store (validate and write its "
    "events, its session's lock included), catch_up (project them before answering)",
    ["command", "stage"], buckets=SECONDS,
)  # fmt: skip
COMMITS = Counter("ctxstore_commits_total", "Context commits this process projected and stored")
OVER_WINDOW = Counter(
    "ctxstore_over_window_commits_total",
    "Context commits whose request does not fit window - output_reserve",
)
TRANSITIONS = Counter(
    "ctxstore_rule_transitions_total",
    "Item state changes the rule pipeline made, by rule and target state",
    ["rule", "to_state"],
)
COMPACTIONS = Counter(
    "ctxstore_compaction_runs_total",
    "Compactions (summaries) by trigger (auto, request) and outcome (stored, "
    "nothing_to_compact, failed)",
    ["trigger", "outcome"],
)
FOLDED_TOKENS = Counter(
    "ctxstore_compaction_folded_tokens_total",
    "Tokens of the items a stored summary covers, by rule",
    ["rule"],
)
SUMMARIZER_CALLS = Counter(
    "ctxstore_summarizer_calls_total",
    "Summarizer calls by kind (extractive, openai, anthropic) and outcome (ok, failed)",
    ["kind", "outcome"],
)
SUMMARIZER_DURATION = Histogram(
    "ctxstore_summarizer_duration_seconds",
    "Summarizer call latency by kind", ["kind"], buckets=SECONDS,
)  # fmt: skip
WINDOW_SHARE = Histogram(
    "ctxstore_render_window_share",
    "Share of window - output_reserve a rendered request uses (over 1: over the window)",
    buckets=SHARE,
)
LIMIT_REFUSALS = Counter(
    "ctxstore_limit_refusals_total",
    "Requests refused by a limit (413, 415, 429 and 408), by status and limit (error code)",
    ["status", "limit"],
)
WORKER_LAG = Gauge(
    "ctxstore_worker_projection_lag_events",
    "Events of the log this process's projector of a partition had not applied at its "
    "last catch-up (one series per live process in multiprocess mode: label pid)",
    ["partition"], multiprocess_mode="liveall",
)  # fmt: skip
WORKING_SET_SESSIONS = Gauge(
    "ctxstore_working_set_sessions",
    "Sessions a process's projector of a partition holds in memory (its working set, "
    "CTXSTORE_WORKING_SET) after its last trim (label pid in multiprocess mode)",
    ["partition"], multiprocess_mode="liveall",
)  # fmt: skip
WORKING_SET_NODES = Gauge(
    "ctxstore_working_set_nodes",
    "Nodes a process's projector of a partition holds in memory after its last trim",
    ["partition"], multiprocess_mode="liveall",
)  # fmt: skip
WORKING_SET_EVICTIONS = Counter(
    "ctxstore_working_set_evictions_total",
    "Sessions a working set let go (least recently used, over its node budget); a "
    "session let go is read back from the projection tables when next asked for",
    ["partition"],
)
REBUILD_DONE = Gauge(
    "ctxstore_rebuild_replayed_events",
    "Events a running ctxstore rebuild (offline or --online) has replayed so far",
    multiprocess_mode="mostrecent",  # the latest rebuild's, not the largest
)
REBUILD_TOTAL = Gauge(
    "ctxstore_rebuild_total_events",
    "Events in the log when the running (or last) ctxstore rebuild started",
    multiprocess_mode="mostrecent",  # the latest rebuild's, not the largest
)
