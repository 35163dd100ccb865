"""OpenTelemetry: spans and metrics of an instrumented store (sync and async faces) read with
the SDK's in-memory exporter and metric reader, against the real test PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import alkstore
from alkstore.telemetry import instrument, uninstrument

Q = "otel"


class Telemetry:
    """An SDK tracer provider and meter provider that keep what they get in memory."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == metric
            for point in m.data.data_points
        ]

    def total(self, metric: str, **attributes: Any) -> Any:
        return sum(
            p.value
            for p in self.points(metric)
            if all(p.attributes.get(k) == v for k, v in attributes.items())
        )


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    t = Telemetry()
    yield t
    t.tracer_provider.shutdown()
    t.meter_provider.shutdown()


def wait_for(check: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        threading.Event().wait(0.02)


def test_store_operations_make_messaging_spans_and_metrics(
    pg_dsn: str, schema_name: str, otel: Telemetry
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue(Q)
        instrument(
            store,
            tracer_provider=otel.tracer_provider,
            meter_provider=otel.meter_provider,
            depth_queues=[Q],
        )
        first = store.send(Q, {"n": 1})
        more = store.send_many(Q, [{"data": {"n": i}} for i in range(2, 5)])
        assert otel.total("alkstore.queue.depth", **{"messaging.destination.name": Q}) == 4
        jobs = store.fetch(Q, batch_size=2)
        assert store.complete(Q, jobs[0]) == 1
        assert store.fail(Q, (j for j in jobs[1:]), {"why": "test"}) == 1
        handoff = store.complete_and_fetch(Q, [], batch_size=2)

    (send,) = otel.finished(f"send {Q}")
    assert send.kind is SpanKind.PRODUCER
    assert send.attributes is not None
    assert dict(send.attributes) == {
        "messaging.system": "alkstore",
        "messaging.destination.name": Q,
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.message.id": str(first),
    }
    (many,) = otel.finished(f"send_many {Q}")
    assert many.kind is SpanKind.PRODUCER
    assert many.attributes is not None
    assert many.attributes["messaging.batch.message_count"] == 3
    (fetch,) = otel.finished(f"fetch {Q}")
    assert fetch.kind is SpanKind.CLIENT
    assert fetch.attributes is not None
    assert fetch.attributes["messaging.operation.type"] == "receive"
    assert fetch.attributes["alkstore.received.message_count"] == 2
    (complete,) = otel.finished(f"complete {Q}")
    assert complete.attributes is not None
    assert complete.attributes["messaging.operation.type"] == "settle"
    assert complete.attributes["messaging.message.id"] == str(jobs[0].id)
    (fail,) = otel.finished(f"fail {Q}")
    assert fail.attributes is not None
    assert fail.attributes["messaging.batch.message_count"] == 1
    (cf,) = otel.finished(f"complete_and_fetch {Q}")
    assert cf.attributes is not None
    assert cf.attributes["alkstore.received.message_count"] == len(handoff.jobs) == 2

    assert otel.total("messaging.client.sent.messages") == 1 + len(more) == 4
    assert otel.total("messaging.client.consumed.messages") == 4
    assert otel.total("alkstore.client.settled.messages", **{"alkstore.outcome": "completed"}) == 1
    assert otel.total("alkstore.client.settled.messages", **{"alkstore.outcome": "failed"}) == 1
    durations = {
        p.attributes["messaging.operation.name"]: p.count
        for p in otel.points("messaging.client.operation.duration")
    }
    assert durations == {
        "send": 1,
        "send_many": 1,
        "fetch": 1,
        "complete": 1,
        "fail": 1,
        "complete_and_fetch": 1,
    }


def test_worker_handler_runs_in_a_process_span(
    pg_dsn: str, schema_name: str, otel: Telemetry
) -> None:
    seen: list[Any] = []

    def handler(job: alkstore.Job, ctx: Any) -> None:
        seen.append(ctx)
        if job.data["n"] == 2:
            raise ValueError("two")

    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue(Q, retry_limit=0)
        instrument(store, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
        ids = store.send_many(Q, [{"data": {"n": 1}}, {"data": {"n": 2}}])
        with store.work(Q, handler, poll_interval=0.05):
            wait_for(lambda: len(otel.finished(f"process {Q}")) == 2)

    assert len(seen) == 2 and all(ctx is not None for ctx in seen)  # the context kept
    spans = {s.attributes["messaging.message.id"]: s for s in otel.finished(f"process {Q}")}
    assert set(spans) == {str(i) for i in ids}
    ok, bad = spans[str(ids[0])], spans[str(ids[1])]
    assert ok.kind is SpanKind.CONSUMER
    assert ok.attributes is not None
    assert ok.attributes["messaging.operation.type"] == "process"
    assert ok.status.status_code is StatusCode.UNSET
    assert bad.status.status_code is StatusCode.ERROR
    assert bad.events[0].name == "exception"
    errors = [
        p.attributes.get("error.type")
        for p in otel.points("messaging.client.operation.duration")
        if p.attributes["messaging.operation.name"] == "process"
    ]
    assert sorted(errors, key=str) == sorted([None, "ValueError"], key=str)


def test_async_store_is_measured_the_same(pg_dsn: str, schema_name: str, otel: Telemetry) -> None:
    async def scenario() -> None:
        async with alkstore.connect_async(pg_dsn, schema=schema_name) as store:
            await store.create_queue(Q)
            instrument(
                store, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
            )
            job_id = await store.send(Q, {"n": 1})
            done = asyncio.Event()

            async def handler(job: alkstore.Job) -> str:
                done.set()
                return "ok"

            worker = await store.work(Q, handler, poll_interval=0.05)
            await asyncio.wait_for(done.wait(), 20)
            await worker.stop()
            assert (await store.get_job(Q, job_id)).state is alkstore.JobState.COMPLETED  # type: ignore[union-attr]
            uninstrument(store)
            await store.send(Q, {"n": 2})
            assert len(otel.finished(f"send {Q}")) == 1  # the store is plain again

    asyncio.run(scenario())
    (process,) = otel.finished(f"process {Q}")
    assert process.kind is SpanKind.CONSUMER
    assert otel.total("messaging.client.sent.messages") == 1
    assert otel.total("alkstore.client.settled.messages") == 1


def test_stores_sharing_a_meter_count_into_the_same_metrics(
    pg_dsn: str, schema_name: str, otel: Telemetry
) -> None:
    """Two stores on one meter provider (and one store instrumented again after
    uninstrument) all reach the reader: the counts are registered once per meter."""
    with (
        alkstore.connect(pg_dsn, schema=schema_name) as first,
        alkstore.connect(pg_dsn, schema=schema_name) as second,
    ):
        first.create_queue(Q)
        for store in (first, second):
            instrument(store, meter_provider=otel.meter_provider)
        first.send(Q, 1)
        second.send_many(Q, [{"data": 2}, {"data": 3}])
        uninstrument(second)
        second.send(Q, 4)  # not measured
        instrument(second, meter_provider=otel.meter_provider)
        second.send(Q, 5)
        assert len(second.fetch(Q, batch_size=10)) == 5
    assert otel.total("messaging.client.sent.messages") == 1 + 2 + 1
    assert otel.total("messaging.client.sent.messages", **{"messaging.operation.name": "send"}) == 2
    assert otel.total("messaging.client.consumed.messages") == 5


def test_stores_sharing_a_meter_both_report_their_queue_depths(
    pg_dsn: str, schema_name: str, otel: Telemetry
) -> None:
    """The depth gauge is registered once per meter too: a second store's queues reach the
    reader, and an uninstrumented store's queues leave it."""
    depth = "alkstore.queue.depth"
    with (
        alkstore.connect(pg_dsn, schema=schema_name) as first,
        alkstore.connect(pg_dsn, schema=schema_name) as second,
    ):
        first.create_queue(Q)
        first.create_queue("other")
        instrument(first, meter_provider=otel.meter_provider, depth_queues=[Q])
        instrument(second, meter_provider=otel.meter_provider, depth_queues=["other"])
        first.send_many(Q, [{"data": 1}, {"data": 2}])
        second.send_many("other", [{"data": 1}, {"data": 2}, {"data": 3}])
        assert otel.total(depth, **{"messaging.destination.name": Q}) == 2
        assert otel.total(depth, **{"messaging.destination.name": "other"}) == 3
        uninstrument(second)
        assert otel.total(depth, **{"messaging.destination.name": "other"}) == 0
        assert otel.total(depth, **{"messaging.destination.name": Q}) == 2


def test_instrument_refuses_twice_and_depth_on_an_async_store(
    pg_dsn: str, schema_name: str, otel: Telemetry
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        instrument(store, tracer_provider=otel.tracer_provider)
        with pytest.raises(alkstore.InvalidOptions, match="instrumented already"):
            instrument(store)

    async def scenario() -> None:
        async with alkstore.connect_async(pg_dsn, schema=schema_name) as astore:
            with pytest.raises(alkstore.InvalidOptions, match="depth_queues"):
                instrument(astore, depth_queues=[Q])

    asyncio.run(scenario())


def test_an_uninstrumented_store_imports_no_opentelemetry(pg_dsn: str, schema_name: str) -> None:
    import subprocess
    import sys

    code = (
        "import sys, alkstore\n"
        f"with alkstore.connect({pg_dsn!r}, schema={schema_name!r}) as s:\n"
        "    s.create_queue('q'); s.send('q'); s.fetch('q')\n"
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry', 'alkstore.tele'))]\n"
        "print(sorted(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for this error")


def test_a_failed_call_always_ends_its_span_even_when_its_error_cannot_be_described(
    pg_dsn: str, schema_name: str, otel: Telemetry
) -> None:
    from opentelemetry import trace

    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue(Q)

        def broken_fetch(queue: str, *args: Any, **kwargs: Any) -> Any:
            raise _Unprintable()

        store.fetch = broken_fetch  # type: ignore[method-assign]
        instrument(store, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
        with pytest.raises((_Unprintable, RuntimeError)):
            store.fetch(Q, batch_size=1)
        assert not trace.get_current_span().get_span_context().is_valid  # not left current
        store.send(Q, {"n": 1})

    (fetch,) = otel.finished(f"fetch {Q}")  # ended, so exported
    (send,) = otel.finished(f"send {Q}")
    assert fetch.end_time is not None
    assert send.parent is None  # not a child of the failed fetch's span
    durations = {
        p.attributes["messaging.operation.name"]: p.count
        for p in otel.points("messaging.client.operation.duration")
    }
    assert durations["fetch"] == 1


def test_a_queue_that_is_not_a_name_is_refused_by_the_store_not_the_telemetry(
    pg_dsn: str, schema_name: str, otel: Telemetry
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        instrument(store, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
        with pytest.raises(alkstore.InvalidOptions):
            store.fetch(["not", "a", "name"], batch_size=1)  # type: ignore[arg-type]
