"""Import a session from a JSONL transcript.

The format (one JSON object per line; blank lines are ignored, line numbers
count every physical line so an error points at the right one)::

    {"type": "session", "title": "Fix the parser", "model": "anthropic:claude-sonnet-4",
     "context_window": 200000, "at": "2026-01-01T10:00:00Z"}          # line 1, once
    {"type": "node", "id": "u1", "role": "user", "input": "...", "at": "..."}
    {"type": "node", "id": "a1", "role": "assistant", "output": "...", "predecessor": "u1"}
    {"type": "node", "id": "t1", "role": "tool", "name": "read_file", "input": {...},
     "output": "...", "caller": "a1", "call_id": "call_1", "reads": ["t0"]}
    {"type": "retry", "of": "a1", "id": "a1b", "output": "..."}   # also "edit"
    {"type": "checkout", "node": "a1", "version": 2}
    {"type": "pin", "node": "u1"}                                # also "unpin"
    {"type": "usage", "request_id": "r1", "input_tokens": 1200, "cache_read": 0,
     "output_tokens": 80, "head_node": "a1", "provider": "anthropic"}
    {"type": "usage", "request_id": "r2", "usage": {"prompt_tokens": 1300,
     "prompt_tokens_details": {"cached_tokens": 1024}, "completion_tokens": 60}}
    {"type": "run_start", "run_id": "run-1"}   {"type": "run_finish", "status": "completed"}
    {"type": "model", "model": "openai:gpt-4o", "context_window": 128000}
    {"type": "compaction", "instructions": "keep file paths", "summarizer_model": "gpt-4o-mini"}

Each line is one ``CtxStore`` command, so the domain's own rules decide what
is valid.  Keys per type are fixed: an unknown key is an error (a typo such
as ``"predecesor"`` would otherwise silently attach a node to HEAD).

* ``id`` becomes the node id verbatim; without one the store makes a UUID.
* ``predecessor``/``caller`` default the way the API does: to HEAD, and for
  a tool node to the assistant at (or above) HEAD.
* ``retry`` and ``edit`` both add a sibling version of ``of``, recorded as
  the kind the line names: a retry is a new sample of the same prompt (its
  text may differ), an edit changes the node.
* ``at`` is an ISO-8601 time (``Z`` or an offset; a time without one is
  UTC).  A line without ``at`` happens at the previous line's time, and
  before any ``at`` at the moment of the import.  Times may not go back:
  idle clearing measures the gaps between them.

The whole transcript runs against the new session in memory and is saved in
one atomic write (``CtxStore.import_session``): a bad line, a node id another
session holds, or a database that stays locked leaves nothing behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from domain.application import CtxStore
from domain.errors import DomainError
from domain.session import Session
from scripts.progress import Progress

JSON = dict[str, Any]


class TranscriptError(DomainError):
    """A transcript line that cannot be read or that the domain refuses."""

    code = "bad_transcript"


class BadFile(DomainError):
    """The transcript file itself cannot be opened."""

    code = "bad_file"


STR, INT, LIST, DICT, ANY = "a string", "an integer", "a list of strings", "an object", "any"
# type -> {key: (kind, required)}; "type" and "at" are allowed everywhere.
SCHEMA: dict[str, dict[str, tuple[str, bool]]] = {
    "session": {"title": (STR, False), "model": (STR, True), "context_window": (INT, False)},
    "node": {
        "id": (STR, False), "role": (STR, True), "name": (STR, False), "input": (ANY, False),
        "output": (ANY, False), "predecessor": (STR, False), "caller": (STR, False),
        "call_id": (STR, False), "reads": (LIST, False), "metadata": (DICT, False),
    },
    "retry": {"of": (STR, True), "id": (STR, False), "name": (STR, False),
              "input": (ANY, False), "output": (ANY, False), "metadata": (DICT, False)},
    "checkout": {"node": (STR, True), "version": (INT, False)},
    "pin": {"node": (STR, True)},
    "usage": {
        "request_id": (STR, True), "input_tokens": (INT, False), "cache_read": (INT, False),
        "cache_creation": (INT, False), "output_tokens": (INT, False),
        "usage": (DICT, False), "provider": (STR, False), "head_node": (STR, False),
    },
    "run_start": {"run_id": (STR, False)},
    "run_finish": {"status": (STR, False)},
    "model": {"model": (STR, True), "context_window": (INT, False)},
    "compaction": {"instructions": (STR, False), "summarizer_model": (STR, False)},
}  # fmt: skip
ALIASES = {"edit": "retry", "unpin": "pin"}


@dataclass(frozen=True)
class Step:
    """One transcript line, checked for shape, with its time resolved."""

    line: int
    type: str
    fields: JSON
    at: datetime


def parse_time(text: Any, line: int) -> datetime:
    if not isinstance(text, str):
        raise TranscriptError(f"line {line}: 'at' must be an ISO-8601 string", line=line)
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise TranscriptError(f"line {line}: 'at' is not an ISO-8601 time: {text!r}",
                              line=line) from None  # fmt: skip
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _check(kind: str, value: Any) -> bool:
    if kind == STR:
        return isinstance(value, str)
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == LIST:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == DICT:
        return isinstance(value, dict)
    return True


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # json.loads would accept NaN and Infinity


def _record(raw: str, line: int) -> JSON:
    try:
        record = json.loads(raw, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise TranscriptError(f"line {line}: not valid JSON: {exc.msg} (column {exc.colno})",
                              line=line) from None  # fmt: skip
    except ValueError as exc:
        raise TranscriptError(f"line {line}: not valid JSON: {exc}", line=line) from None
    except RecursionError:
        raise TranscriptError(f"line {line}: JSON nested too deeply", line=line) from None
    if not isinstance(record, dict):
        raise TranscriptError(f"line {line}: expected a JSON object", line=line)
    kind = record.get("type")
    if set(record) == {"seq", "type", "timestamp", "data"}:
        raise TranscriptError(
            f"line {line}: this is a 'ctxstore export' (the session's event log, for audit "
            "and replay), not a transcript: import reads the transcript format in "
            "scripts/transcript.py", line=line,
        )  # fmt: skip
    if not isinstance(kind, str) or (kind not in SCHEMA and kind not in ALIASES):
        known = ", ".join(sorted([*SCHEMA, *ALIASES]))
        raise TranscriptError(f"line {line}: unknown type {kind!r} (one of: {known})", line=line)
    schema = SCHEMA[ALIASES.get(kind, kind)]
    unknown = sorted(set(record) - set(schema) - {"type", "at"})
    if unknown:
        raise TranscriptError(f"line {line}: unknown key(s) for {kind!r}: {', '.join(unknown)}",
                              line=line)  # fmt: skip
    for key, (expected, required) in schema.items():
        if key not in record:
            if required:
                raise TranscriptError(f"line {line}: {kind!r} needs {key!r}", line=line)
        elif not (_check(expected, record[key]) or (record[key] is None and not required)):
            raise TranscriptError(f"line {line}: {key!r} must be {expected}", line=line)
    return record


def parse(lines: Iterable[str], now: datetime | None = None) -> list[Step]:
    """Every line as a ``Step``; the first is the ``session`` line."""
    records: list[tuple[int, str, JSON, datetime | None]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        record = _record(raw, number)
        kind = record.pop("type")
        if not records and kind != "session":
            raise TranscriptError(f"line {number}: the first line must be the 'session' line, "
                                  f"not {kind!r}", line=number)  # fmt: skip
        if records and kind == "session":
            raise TranscriptError(f"line {number}: a second 'session' line (the first is line "
                                  f"{records[0][0]})", line=number)  # fmt: skip
        at = parse_time(record.pop("at"), number) if "at" in record else None
        records.append((number, kind, record, at))
    if not records:
        raise TranscriptError("line 1: empty transcript: expected a 'session' line", line=1)
    # Lines before the first explicit time share it, so a session line without
    # "at" does not start at the import's wall clock and then jump backwards.
    first = next((at for *_, at in records if at is not None), None)
    clock = first or now or datetime.now(UTC)
    clock_line = records[0][0]
    steps: list[Step] = []
    for number, kind, fields, at in records:
        if at is not None:
            if at < clock:
                raise TranscriptError(f"line {number}: 'at' goes back in time (before line "
                                      f"{clock_line})", line=number)  # fmt: skip
            clock, clock_line = at, number
        steps.append(Step(number, kind, fields, clock))
    return steps


def read(path: str | Path) -> list[Step]:
    try:
        with open(path, encoding="utf-8") as handle:
            return parse(handle)
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise BadFile(f"{path}: {exc.strerror or exc}") from None


def _commands(agg: Session) -> dict[str, Callable[[JSON, datetime], Any]]:
    """Each line type as the command it is, run on the session in memory."""

    def node(f: JSON, at: datetime) -> Any:
        kwargs = {k: v for k, v in f.items() if k != "id"}
        return agg.append_node(node_id=f.get("id"), at=at, **kwargs)

    def version(kind: str) -> Callable[[JSON, datetime], Any]:
        def add(f: JSON, at: datetime) -> Any:
            kwargs = {k: v for k, v in f.items() if k not in ("of", "id")}
            return agg.add_sibling(f["of"], kind=kind, node_id=f.get("id"), at=at, **kwargs)

        return add

    return {
        "node": node,
        "retry": version("retry"),
        "edit": version("edit"),
        "checkout": lambda f, at: agg.checkout(f["node"], f.get("version"), at=at),
        "pin": lambda f, at: agg.pin(f["node"], at=at),
        "unpin": lambda f, at: agg.unpin(f["node"], at=at),
        "usage": lambda f, at: agg.measure_usage(
            at=at, **{k: v for k, v in f.items() if v is not None}
        ),
        "run_start": lambda f, at: agg.start_run(f.get("run_id"), at=at),
        "run_finish": lambda f, at: agg.finish_run(f.get("status") or "completed", at=at),
        "model": lambda f, at: agg.switch_model(f["model"], f.get("context_window"), at=at),
        "compaction": lambda f, at: agg.configure_compaction(
            f.get("instructions"), f.get("summarizer_model"), at=at
        ),
    }


def import_transcript(
    app: CtxStore, steps: list[Step],
    after: Callable[[Session], None] | None = None,
    progress: Progress | None = None, tenant: str | None = None,
) -> UUID:  # fmt: skip
    """Run the steps as commands on a new session, saved in one write; its id.

    ``after`` runs after each line's command: the importer compacts there, as
    the API compacts after each request.
    Nothing is stored unless every line is.  ``progress`` counts the lines run.
    """
    head, *rest = steps

    def build(agg: Session) -> None:
        run_line = _commands(agg)
        if after is not None:
            after(agg)
        for step in rest:
            try:
                run_line[step.type](step.fields, step.at)
            except DomainError as exc:
                raise at_line(exc, step.line) from None
            if after is not None:
                after(agg)
            if progress is not None:
                progress.advance()

    try:
        sid, _ = app.import_session(head.fields.get("title") or "", head.fields["model"],
                                    head.fields.get("context_window"), head.at, build,
                                    tenant=tenant)  # fmt: skip
    except DomainError as exc:
        if "line" in exc.details:
            raise
        # The session line itself, or the one write: a node id another session holds.
        lines = {s.fields.get("id"): s.line for s in rest if s.fields.get("id")}
        raise at_line(exc, lines.get(exc.details.get("node_id"), head.line)) from None
    return sid


def at_line(exc: DomainError, line: int) -> DomainError:
    """The same refusal (same class and code), its message prefixed with the line."""
    exc.message = f"line {line}: {exc.message}"
    exc.args = (exc.message,)
    exc.details = {**exc.details, "line": line}
    return exc


def read_lines(path: str | Path) -> list[tuple[int, str]]:
    """The file's non-blank lines with their (1-based, physical) numbers."""
    try:
        with open(path, encoding="utf-8") as handle:
            return [(n, line) for n, line in enumerate(handle, start=1) if line.strip()]
    except UnicodeDecodeError as exc:
        raise TranscriptError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise BadFile(f"{path}: {exc.strerror or exc}") from None


def import_file(url: str, path: str | Path, tenant: str | None = None) -> str:
    """Import a transcript or an export file into the store at ``url``; the new session's id.

    An export (``ctxstore export``) is recognised by its first line and
    recreated event by event (``scripts.export_import``), its summaries with
    it.  A transcript comes out as if its lines had been posted to the API
    one by one: compacted after each line the API compacts after, with the
    same summarizer, all in the one write (``service.memory_projection``).
    The projections catch up before this returns, so the session is ready to
    serve the moment the id is printed.  ``tenant`` owns the new session
    (default: an export's own tenant, else the default tenant).  On a terminal each long phase shows
    a progress bar on stderr (``scripts/progress.py``).
    """
    from scripts.export_import import import_export, is_export, read_export
    from service.memory_projection import ImportCompactor  # the parser needs no projections
    from service.runtime import Runtime

    lines = read_lines(path)
    try:
        export = bool(lines) and is_export(json.loads(lines[0][1]))
    except ValueError:
        export = False
    records = read_export(lines) if export else None
    steps = None if export else parse(_numbered(lines))
    runtime = Runtime(url)
    try:
        if records is not None:
            sid = import_export(runtime.app, records, tenant)
        else:
            assert steps is not None
            position = (runtime.app.recorder.max_notification_id() or 0) + 1
            compactor = ImportCompactor(runtime.processor.policy_at(position),
                                        runtime.summarizer)  # fmt: skip
            after = compactor.after if runtime.auto_compact else None
            with Progress("import: running lines", len(steps) - 1, "lines") as bar:
                sid = import_transcript(runtime.app, steps, after, bar, tenant)
        start = runtime.position()
        pending = (runtime.app.recorder.max_notification_id() or 0) - start
        with Progress("import: projecting", pending, "events") as bar:
            runtime.catch_up(on_page=bar.update)
    finally:
        runtime.close()
    return str(sid)


def _numbered(lines: list[tuple[int, str]]) -> list[str]:
    """Back to physical lines (blank ones blank), so parse's line numbers stay right."""
    out: list[str] = []
    for number, text in lines:
        out += [""] * (number - 1 - len(out)) + [text]
    return out
