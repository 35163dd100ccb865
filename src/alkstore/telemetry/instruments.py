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


class Depths:
    """The queues whose depth one meter's ``alkstore.queue.depth`` gauge reports, with the
    ``queue_stats`` of the store that reads each (several stores may share a meter)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: dict[int, tuple[Callable[[str], QueueStats], Sequence[str]]] = {}

    def add(self, owner: object, stats: Callable[[str], QueueStats], queues: Sequence[str]) -> None:
        """Report ``queues`` through ``stats`` for ``owner`` (an instrumented store's tools)."""
        with self._lock:
            self._sources[id(owner)] = (stats, queues)

    def remove(self, owner: object) -> None:
        """Stop reporting what ``owner`` added."""
        with self._lock:
            self._sources.pop(id(owner), None)

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        """The queued jobs of every reported queue, read now."""
        with self._lock:
            sources = list(self._sources.values())
        for stats, queues in sources:
            for queue in queues:
                yield Observation(stats(queue).queued, attributes=base_attributes(queue))


@attrs.frozen
class MeterInstruments:
    """The observable instruments of one meter, registered with it once: the SDK ignores a
    second registration of an instrument name, so a second store's own callbacks would
    never be read. Every store instrumented with the meter adds to them."""

    counts: dict[str, Count]
    """By :data:`COUNTS` attribute."""
    depths: Depths


_METERS: weakref.WeakKeyDictionary[metrics.Meter, MeterInstruments] = weakref.WeakKeyDictionary()
_METERS_LOCK = threading.Lock()


def meter_instruments(meter: metrics.Meter) -> MeterInstruments:
    """The observable instruments of ``meter``, registered on first use."""
    with _METERS_LOCK:
        shared = _METERS.get(meter)
        if shared is None:
            counts = {attribute: Count() for attribute, _n, _d in COUNTS}
            shared = _METERS[meter] = MeterInstruments(counts, Depths())
            for attribute, name, description in COUNTS:
                meter.create_observable_counter(
                    name,
                    callbacks=[counts[attribute].observe],
                    unit="{message}",
                    description=description,
                )
            meter.create_observable_gauge(
                "alkstore.queue.depth",
                callbacks=[shared.depths.observe],
                unit="{message}",
                description="Jobs waiting in the queue (created + retry)",
            )
        return shared


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
    depths: Depths

    @classmethod
    def create(
        cls,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
    ) -> Instruments:
        """The instruments, from the given providers or OpenTelemetry's global ones."""
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        shared = meter_instruments(meter)
        counts = shared.counts
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
            depths=shared.depths,
        )

    def observe_depth(self, stats: Callable[[str], QueueStats], queues: Sequence[str]) -> None:
        """Report the queued jobs of ``queues`` as the ``alkstore.queue.depth`` gauge."""
        self.depths.add(self, stats, queues)

    def stop_depth(self) -> None:
        """Stop reporting this store's queues on the gauge."""
        self.depths.remove(self)


def base_attributes(queue: str) -> dict[str, Any]:
    """The attributes every span and metric point of ``queue`` carries."""
    return {"messaging.system": SYSTEM, "messaging.destination.name": queue}
