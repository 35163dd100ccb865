"""The tracer and the metric instruments of one instrumented store."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation

from ..core.records import QueueStats

SCOPE = "alkstore"
"""The instrumentation scope of alkstore's spans and metrics."""

SYSTEM = "alkstore"
"""The value of ``messaging.system``."""


class Count:
    """A monotonic count kept in the process, reported by an observable counter.

    Adding is a locked integer sum (a fraction of a microsecond) where a synchronous counter
    costs a metric-SDK call on every store operation (about 10 us, measured in the
    instrumented drain: docs/observability.md, "Overhead"); the reader gets the same
    cumulative sums at each collection.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[tuple[str, str, str | None], int] = {}

    def add(self, amount: int, queue: str, operation: str, outcome: str | None = None) -> None:
        """Count ``amount`` messages of ``operation`` on ``queue`` (with ``alkstore.outcome``)."""
        key = (queue, operation, outcome)
        with self._lock:
            self._totals[key] = self._totals.get(key, 0) + amount

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        """The totals so far, one observation per attribute set."""
        with self._lock:
            totals = list(self._totals.items())
        for (queue, operation, outcome), total in totals:
            attributes = base_attributes(queue)
            attributes["messaging.operation.name"] = operation
            if outcome is not None:
                attributes["alkstore.outcome"] = outcome
            yield Observation(total, attributes)


COUNTS = (
    ("sent", "messaging.client.sent.messages", "Jobs sent"),
    ("received", "messaging.client.consumed.messages", "Jobs fetched for processing"),
    ("settled", "alkstore.client.settled.messages", "Jobs completed or failed"),
)
"""The counts of an instrumented store: attribute, metric name, description."""


_COUNTS: weakref.WeakKeyDictionary[metrics.Meter, dict[str, Count]] = weakref.WeakKeyDictionary()
_COUNTS_LOCK = threading.Lock()


def meter_counts(meter: metrics.Meter) -> dict[str, Count]:
    """The counts of ``meter`` (by :data:`COUNTS` attribute), registered with it once.

    Every store instrumented with one meter adds to the same counts, as they would to one
    synchronous counter: the SDK ignores a second registration of an instrument name, so a
    second store's own observable counters would never be read.
    """
    with _COUNTS_LOCK:
        counts = _COUNTS.get(meter)
        if counts is None:
            counts = _COUNTS[meter] = {attribute: Count() for attribute, _n, _d in COUNTS}
            for attribute, name, description in COUNTS:
                meter.create_observable_counter(
                    name,
                    callbacks=[counts[attribute].observe],
                    unit="{message}",
                    description=description,
                )
        return counts


@attrs.define
class Instruments:
    """Where the spans and metrics of an instrumented store go."""

    tracer: trace.Tracer
    sent: Count
    """``messaging.client.sent.messages``: jobs sent (refused ones are not counted)."""
    received: Count
    """``messaging.client.consumed.messages``: jobs handed to the application by a fetch."""
    settled: Count
    """``alkstore.client.settled.messages``: jobs completed or failed (``alkstore.outcome``)."""
    duration: metrics.Histogram
    """``messaging.client.operation.duration``: seconds of each store operation."""
    meter: metrics.Meter
    depth_queues: Sequence[str] = ()

    @classmethod
    def create(
        cls,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
    ) -> Instruments:
        """The instruments, from the given providers or OpenTelemetry's global ones."""
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        counts = meter_counts(meter)
        return cls(
            tracer=trace.get_tracer(SCOPE, tracer_provider=tracer_provider),
            sent=counts["sent"],
            received=counts["received"],
            settled=counts["settled"],
            duration=meter.create_histogram(
                "messaging.client.operation.duration",
                unit="s",
                description="Duration of a store operation",
            ),
            meter=meter,
        )

    def observe_depth(self, stats: Callable[[str], QueueStats], queues: Sequence[str]) -> None:
        """Report the queued jobs of ``queues`` as the ``alkstore.queue.depth`` gauge."""
        self.depth_queues = queues

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            for queue in self.depth_queues:
                yield Observation(stats(queue).queued, attributes=base_attributes(queue))

        self.meter.create_observable_gauge(
            "alkstore.queue.depth",
            callbacks=[observe],
            unit="{message}",
            description="Jobs waiting in the queue (created + retry)",
        )


def base_attributes(queue: str) -> dict[str, Any]:
    """The attributes every span and metric point of ``queue`` carries."""
    return {"messaging.system": SYSTEM, "messaging.destination.name": queue}
