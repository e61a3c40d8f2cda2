"""OpenTelemetry traces: off unless the ``.[otel]`` extra is installed and ``OTEL_*`` asks.

``configure()`` (at app start) turns tracing on when ``OTEL_TRACES_EXPORTER``
is ``otlp`` or ``console``, or when ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (``otlp``, over HTTP);
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the service as
the SDK reads them.  ``OTEL_SDK_DISABLED=true`` keeps it off.  Tests pass
their own provider to ``use``.  Until then every ``span`` is a
``nullcontext``: nothing of OpenTelemetry is imported.

The request's span continues the caller's trace (its ``traceparent``), and
the spans below it (command, event write, catch-up, rule pipeline, render,
summarizer call) follow through worker threads by context variables.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

log = logging.getLogger("ctxstore.telemetry")
_tracer: Any = None  # an opentelemetry Tracer once tracing is on
_owned: list[Any] = []  # the provider ``configure`` made, shut down with the app


def enabled() -> bool:
    return _tracer is not None


def use(provider: Any) -> None:
    """Trace with ``provider`` (a ``TracerProvider``); None turns tracing off."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer("ctxstore")


def configure(env: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on as the ``OTEL_*`` variables say; whether it is on."""
    env = os.environ if env is None else env
    if _tracer is not None:
        return True
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if exporter in ("", "none") and not (endpoint and exporter != "none"):
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        if exporter == "console":
            chosen: Any = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            chosen = OTLPSpanExporter()
    except ImportError as exc:
        log.warning("OTEL_* asks for traces but %s is not installed: pip install "
                    "'ctxstore[otel]'", exc.name)  # fmt: skip
        return False
    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "ctxstore"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(chosen))
    use(provider)
    _owned.append(provider)
    return True


def shutdown() -> None:
    """At the app's end: send the spans still batched (a provider ``configure`` made)."""
    global _tracer
    while _owned:
        _owned.pop().shutdown()
        _tracer = None


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A child span of the current one, or nothing when tracing is off."""
    if _tracer is None:
        return nullcontext()
    return _tracer.start_as_current_span(name, attributes=_clean(attributes))  # type: ignore[no-any-return]


@contextmanager
def server_span(headers: list[tuple[bytes, bytes]], name: str) -> Iterator[Any]:
    """The request's span, continuing the trace its ``traceparent`` names."""
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers
               if k in (b"traceparent", b"tracestate")}  # fmt: skip
    with _tracer.start_as_current_span(name, context=propagate.extract(carrier),
                                       kind=SpanKind.SERVER) as current:  # fmt: skip
        yield current


def current() -> Any:
    """The current span (None when tracing is off)."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    return trace.get_current_span()


def set_attributes(current: Any, **attributes: Any) -> None:
    if current is not None:
        current.set_attributes(_clean(attributes))


def trace_id(current: Any) -> str | None:
    if current is None:
        return None
    return f"{current.get_span_context().trace_id:032x}"


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """``gen_ai__request__model`` -> ``gen_ai.request.model``; None values left out."""
    return {k.replace("__", "."): v for k, v in attributes.items() if v is not None}
