"""The tracer and the metric instruments of one instrumented store."""

from __future__ import annotations

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


@attrs.define
class Instruments:
    """Where the spans and metrics of an instrumented store go."""

    tracer: trace.Tracer
    sent: metrics.Counter
    """``messaging.client.sent.messages``: jobs sent (refused ones are not counted)."""
    received: metrics.Counter
    """``messaging.client.consumed.messages``: jobs handed to the application by a fetch."""
    settled: metrics.Counter
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
        return cls(
            tracer=trace.get_tracer(SCOPE, tracer_provider=tracer_provider),
            sent=meter.create_counter(
                "messaging.client.sent.messages", unit="{message}", description="Jobs sent"
            ),
            received=meter.create_counter(
                "messaging.client.consumed.messages",
                unit="{message}",
                description="Jobs fetched for processing",
            ),
            settled=meter.create_counter(
                "alkstore.client.settled.messages",
                unit="{message}",
                description="Jobs completed or failed",
            ),
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
