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
import time
from typing import Any

ACCESS = logging.getLogger("ctxstore.access")
ACCESS_FIELDS = ("request_id", "route", "method", "status", "latency_ms", "tenant",
                 "session_id", "command", "outcome", "code", "trace_id")  # fmt: skip
UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access")


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
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_json() -> None:
    """Every ctxstore and uvicorn logger writes JSON lines; uvicorn's own access
    line (a raw path and query) is off, the middleware's replaces it."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    for name in ("ctxstore", *UVICORN):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
        if logger.level == logging.NOTSET or name == "ctxstore":
            logger.setLevel(logging.INFO)
    logging.getLogger("uvicorn.access").disabled = True


def access(fields: dict[str, Any]) -> None:
    ACCESS.info("request", extra={"ctxstore": fields})
