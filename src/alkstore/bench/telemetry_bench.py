"""``bench drain --telemetry``: a store measured by OpenTelemetry the way a deployment would,
minus the export (docs/observability.md#overhead)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def instrument_for_bench(store: Any, sample: float = 1.0) -> Any:
    """Instrument ``store`` with SDK providers: every span is recorded (or, with ``sample``
    below 1, the spans of that share of the traces: ``ParentBased(TraceIdRatioBased)``, as
    a deployment that samples would), ended and handed to a span processor whose exporter
    drops it; metrics aggregate in an in-memory reader. Returns the tracer provider.

    OpenTelemetry is imported here, not at the top, so a drain without telemetry loads none
    of it."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

    from ..telemetry import instrument

    class Dropped(SpanExporter):
        """An exporter that accepts every span and sends it nowhere."""

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    sampler = ALWAYS_ON if sample >= 1.0 else ParentBased(TraceIdRatioBased(sample))
    tracer_provider = TracerProvider(sampler=sampler)
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    instrument(store, tracer_provider=tracer_provider, meter_provider=meter_provider)
    return tracer_provider
