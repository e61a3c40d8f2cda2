"""JSON-lines logs (``CTXSTORE_LOG_FORMAT=json``): one object a line on stderr.

An access line per request carries only what ``ACCESS_FIELDS`` names: the
request id, route template, method, status, latency, tenant, session id and
command type.  Never a body, a title, tool arguments, a query string or a
header (keys live there).  Other log lines keep their message; the code
logs no content in messages.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import Any, TextIO

ACCESS = logging.getLogger("ctxstore.access")
ACCESS_FIELDS = ("request_id", "route", "method", "status", "latency_ms", "tenant",
                 "session_id", "command", "outcome", "code", "trace_id")  # fmt: skip
UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access")
_STREAM: list[TextIO | None] = [None]  # where access lines go once JSON logs are configured
_LOCK = threading.Lock()


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "ctxstore", None)
        if isinstance(fields, dict):
            line.update({k: fields[k] for k in ACCESS_FIELDS if fields.get(k) is not None})
        else:
            line["message"] = record.getMessage()
            if record.exc_info and record.exc_info[0] is not None:
                line["error"] = record.exc_info[0].__name__  # no traceback: it may quote data
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str)


def configure_json() -> None:
    """Every ctxstore and uvicorn logger writes JSON lines; uvicorn's own access
    line (a raw path and query) is off, the middleware's replaces it."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    _STREAM[0] = handler.stream
    for name in ("ctxstore", *UVICORN):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
        if logger.level == logging.NOTSET or name == "ctxstore":
            logger.setLevel(logging.INFO)
    logging.getLogger("uvicorn.access").disabled = True


def access(fields: dict[str, Any]) -> None:
    """One access line, written straight to the JSON handler's stream: a logging record
    (caller lookup, formatting) cost more than the line itself."""
    if not ACCESS.isEnabledFor(logging.INFO):
        return
    line = {"ts": _now(), "level": "info", "logger": ACCESS.name}
    line.update((k, v) for k, v in fields.items() if v is not None)
    text = json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
    stream = _STREAM[0]
    if stream is None:
        ACCESS.info("request", extra={"ctxstore": fields})
        return
    with _LOCK:
        stream.write(text)
        stream.flush()


def _now() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
