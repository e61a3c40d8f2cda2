"""``GET /metrics``'s text: this process's metrics, or every process's in multiprocess mode.

With ``PROMETHEUS_MULTIPROC_DIR`` set (``ctxstore serve`` sets it when
several processes serve: ``--workers N``, or the large-body helper), each
process writes its metrics to files there and any one of them answers a
scrape with the sum of all.  Figures read from the database at scrape time
(the projection's lag per partition) are added by the caller as ``extra``.
``prometheus_client`` is imported inside the functions (``telemetry``'s doc).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from telemetry import probes
from telemetry.settings import multiprocess_dir

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Proxy:
    def __init__(self, collect: Callable[[], Iterable[Any]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Any]:
        return self._collect()


def gauges(name: str, help_text: str, label: str, values: Mapping[int, int]) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(name, help_text, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([str(key)], value)
    return family


def render(extra: Callable[[], Iterable[Any]] | None = None) -> bytes:
    """The exposition text: the probes' metrics (summed over processes) and ``extra``."""
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    if probes.enabled():
        probes._m()  # every metric exists (at zero) before the first scrape
    folder = multiprocess_dir()
    if folder:
        MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Proxy(REGISTRY.collect))
    if extra is not None:
        registry.register(_Proxy(extra))
    text: bytes = generate_latest(registry)
    return text


def process_exited(pid: int) -> None:
    """A serving process stops: its live gauges leave the sums (multiprocess mode)."""
    if multiprocess_dir():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
