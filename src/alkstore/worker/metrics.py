"""The worker runtime's own metrics, per queue: handler calls in flight, their durations,
settle retries and fetch errors. The runtime counts them in plain integers under a lock (a
few additions a handler call); with ``prometheus-client`` installed (``alkstore[metrics]``)
:data:`REGISTRY` exports them, read at scrape time.

Expose them from the worker's process (docs/dashboard.md#worker-metrics)::

    from prometheus_client import start_http_server
    from alkstore.worker.metrics import REGISTRY
    start_http_server(9109, registry=REGISTRY)

The registry is a collector too: ``prometheus_client.REGISTRY.register(REGISTRY)`` adds
these metrics to the default one.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from typing import Any

import attrs

BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""The upper bounds (seconds) of the handler duration histogram's buckets."""

_COUNTED_EVENTS = frozenset({"settle_retry", "fetch_error"})
"""Worker events (:class:`~.events.WorkerEvent` kinds) counted."""


@attrs.frozen
class Reading:
    """One queue's metrics at one moment."""

    in_flight: int
    buckets: tuple[int, ...]
    """Handler calls per duration bucket (:data:`BOUNDS`, then one past the last bound)."""
    seconds: float
    """The durations' sum."""
    events: dict[str, int]
    """Counted worker events by kind."""


class QueueMetrics:
    """The metrics of every worker of one queue in this process (see :meth:`of`)."""

    _all: dict[str, QueueMetrics] = {}
    _all_lock = threading.Lock()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._buckets = [0] * (len(BOUNDS) + 1)
        self._seconds = 0.0
        self._events = dict.fromkeys(_COUNTED_EVENTS, 0)

    @classmethod
    def of(cls, queue: str) -> QueueMetrics:
        """The metrics of ``queue``: one object per queue name for the process's lifetime,
        so its counts never go back when a worker stops."""
        with cls._all_lock:
            found = cls._all.get(queue)
            if found is None:
                found = cls._all[queue] = cls()
            return found

    @classmethod
    def every(cls) -> list[tuple[str, QueueMetrics]]:
        """Every queue's metrics, by queue name."""
        with cls._all_lock:
            return sorted(cls._all.items())

    def started(self) -> None:
        """A handler call began."""
        with self._lock:
            self._in_flight += 1

    def finished(self, seconds: float) -> None:
        """A handler call that began ``seconds`` ago ended."""
        at = bisect.bisect_left(BOUNDS, seconds)
        with self._lock:
            self._in_flight -= 1
            self._buckets[at] += 1
            self._seconds += seconds

    def event(self, kind: str) -> None:
        """A worker event of ``kind`` happened (counted when it is one of the counted)."""
        if kind in _COUNTED_EVENTS:
            with self._lock:
                self._events[kind] += 1

    def read(self) -> Reading:
        """The metrics now."""
        with self._lock:
            return Reading(self._in_flight, tuple(self._buckets), self._seconds, dict(self._events))


def _families() -> Iterator[Any]:
    """The metric families of every queue's :class:`QueueMetrics`."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    in_flight = GaugeMetricFamily(
        "alkstore_worker_in_flight_handlers", "Handler calls running now.", labels=["queue"]
    )
    duration = HistogramMetricFamily(
        "alkstore_worker_handler_duration_seconds",
        "Seconds a handler call took, from its start to its return (or exception).",
        labels=["queue"],
    )
    settle_retries = CounterMetricFamily(
        "alkstore_worker_settle_retries",
        "Settles (complete, fail, heartbeat) run again after a connection fault.",
        labels=["queue"],
    )
    fetch_errors = CounterMetricFamily(
        "alkstore_worker_fetch_errors",
        "Fetches that failed (the worker carries on after a backoff).",
        labels=["queue"],
    )
    for queue, metrics in QueueMetrics.every():
        now = metrics.read()
        in_flight.add_metric([queue], now.in_flight)
        bounds = [*(repr(b) for b in BOUNDS), "+Inf"]
        running = 0
        cumulative = []
        for bound, count in zip(bounds, now.buckets, strict=True):
            running += count
            cumulative.append((bound, running))
        duration.add_metric([queue], cumulative, now.seconds)
        settle_retries.add_metric([queue], now.events["settle_retry"])
        fetch_errors.add_metric([queue], now.events["fetch_error"])
    yield from (in_flight, duration, settle_retries, fetch_errors)


try:
    from prometheus_client import CollectorRegistry
    from prometheus_client.registry import Collector
except ImportError:  # the library runs without the metrics extra: nothing is exported
    REGISTRY: Any = None
else:

    class _WorkerCollector(Collector):
        """Reads :class:`QueueMetrics` at each scrape."""

        def collect(self) -> Iterator[Any]:
            """The worker metric families."""
            return _families()

    REGISTRY = CollectorRegistry(auto_describe=False)
    REGISTRY.register(_WorkerCollector())


__all__ = ["BOUNDS", "REGISTRY", "QueueMetrics", "Reading"]
