"""The worker runtime's own Prometheus metrics, kept in :data:`REGISTRY` when
``prometheus-client`` is installed (``alkstore[metrics]``); without it every hook is a no-op.

Expose them from the worker's process (docs/dashboard.md#worker-metrics)::

    from prometheus_client import start_http_server
    from alkstore.worker.metrics import REGISTRY
    start_http_server(9109, registry=REGISTRY)

The registry is a collector too: ``prometheus_client.REGISTRY.register(REGISTRY)`` adds
these metrics to the default one.
"""

from __future__ import annotations

from typing import Any

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
except ImportError:  # the library runs without the metrics extra
    REGISTRY: Any = None
else:
    REGISTRY = CollectorRegistry(auto_describe=True)

_COUNTED_EVENTS = {"settle_retry": "settle_retries", "fetch_error": "fetch_errors"}
"""Worker events (:class:`~.events.WorkerEvent` kinds) counted, by the counter they raise."""


class _Instruments:
    """The metric families, one child per queue."""

    def __init__(self, registry: Any) -> None:
        self.in_flight = Gauge(
            "alkstore_worker_in_flight_handlers",
            "Handler calls running now.",
            ["queue"],
            registry=registry,
        )
        self.duration = Histogram(
            "alkstore_worker_handler_duration_seconds",
            "Seconds a handler call took, from its start to its return (or exception).",
            ["queue"],
            registry=registry,
        )
        self.settle_retries = Counter(
            "alkstore_worker_settle_retries",
            "Settles (complete, fail, heartbeat) run again after a connection fault.",
            ["queue"],
            registry=registry,
        )
        self.fetch_errors = Counter(
            "alkstore_worker_fetch_errors",
            "Fetches that failed (the worker carries on after a backoff).",
            ["queue"],
            registry=registry,
        )


_INSTRUMENTS = None if REGISTRY is None else _Instruments(REGISTRY)


class QueueMetrics:
    """The instruments of one worker's queue (each call does nothing without
    ``prometheus-client``)."""

    def __init__(self, queue: str) -> None:
        self._on = _INSTRUMENTS is not None
        if _INSTRUMENTS is not None:
            self._in_flight = _INSTRUMENTS.in_flight.labels(queue)
            self._duration = _INSTRUMENTS.duration.labels(queue)
            self._events = {
                kind: getattr(_INSTRUMENTS, name).labels(queue)
                for kind, name in _COUNTED_EVENTS.items()
            }

    def started(self) -> None:
        """A handler call began."""
        if self._on:
            self._in_flight.inc()

    def finished(self, seconds: float) -> None:
        """A handler call that began ``seconds`` ago ended."""
        if self._on:
            self._in_flight.dec()
            self._duration.observe(seconds)

    def event(self, kind: str) -> None:
        """A worker event of ``kind`` happened (counted when it is one of the counted)."""
        if self._on and kind in self._events:
            self._events[kind].inc()


__all__ = ["REGISTRY", "QueueMetrics"]
