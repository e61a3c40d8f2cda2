"""What ctxstore tells an operator: metrics, structured logs, traces.

The rest of the code calls the narrow probes in ``telemetry.probes``
(``api/`` and ``service/`` only: ``domain/`` and ``projections/`` know
nothing of it).  ``prometheus_client`` is imported on the first probe, not
with this package, so a server can still choose multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR``) after its command line loaded
(``scripts.cli_serve``).  ``CTXSTORE_METRICS=off`` turns every probe into a
no-op (``scripts/bench_api.py --overhead`` compares the two).
"""
