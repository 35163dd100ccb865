"""The trace context carried inside the job: an instrumented send stores its span's context,
and the worker's process span links to that send span after a real round trip through
PostgreSQL, on the thread worker and the async worker (in-memory span exporter)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import alkstore
from alkstore.telemetry import instrument

Q = "traced"


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    yield spans, provider
    provider.shutdown()


def named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def wait_for(check: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        threading.Event().wait(0.02)


def ids_of(context: Any) -> tuple[int, int]:
    return (context.trace_id, context.span_id)


def check_links(spans: InMemorySpanExporter, ids: list[Any], batch_ids: list[Any]) -> None:
    """Each job's process span links to (and, for a single job, is a child of) the send span
    that stored it; the batch handler's one span links to every job's send."""
    sends = {s.attributes["messaging.message.id"]: s for s in named(spans, f"send {Q}")}
    (many,) = [s for s in named(spans, f"send_many {Q}")]
    process = named(spans, f"process {Q}")
    single = {
        s.attributes["messaging.message.id"]: s
        for s in process
        if s.attributes and "messaging.message.id" in s.attributes
    }
    for job_id in ids:
        send, proc = sends[str(job_id)], single[str(job_id)]
        assert send.kind is SpanKind.PRODUCER and proc.kind is SpanKind.CONSUMER
        assert [ids_of(link.context) for link in proc.links] == [ids_of(send.context)]
        assert proc.links[0].context.is_remote  # read back from the job's row
        assert proc.parent is not None and proc.parent.span_id == send.context.span_id
        assert proc.context.trace_id == send.context.trace_id
    batch = [s for s in process if "messaging.batch.message_count" in (s.attributes or {})]
    assert batch, "no batch process span"
    linked = [ids_of(link.context) for s in batch for link in s.links]
    assert linked == [ids_of(many.context)] * len(batch_ids)
    assert all(s.parent is None for s in batch)  # several sends: links only


def test_thread_worker_links_process_to_send(pg_dsn: str, schema_name: str, exporter: Any) -> None:
    spans, provider = exporter
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue(Q)
        store.create_queue(Q + "-b")
        instrument(store, tracer_provider=provider)
        ids = [store.send(Q, {"n": n}) for n in range(2)]
        stored = store.get_job(Q, ids[0])
        assert stored is not None and stored.trace_context is not None
        assert stored.trace_context["traceparent"].startswith("00-")
        with store.work(Q, lambda job: None, poll_interval=0.05):
            wait_for(lambda: len(named(spans, f"process {Q}")) == 2)
        # A batch of several jobs sent in one send_many, handled by one batch handler call.
        batch_ids = store.send_many(Q, [{"data": 1}, {"data": 2}, {"data": 3}])
        with store.work(Q, lambda jobs: None, batch=True, batch_size=3, poll_interval=0.05):
            wait_for(lambda: len(named(spans, f"process {Q}")) >= 3)
            wait_for(lambda: store.queue_stats(Q).queued == 0)
    check_links(spans, ids, batch_ids)


def test_async_worker_links_process_to_send(pg_dsn: str, schema_name: str, exporter: Any) -> None:
    spans, provider = exporter

    async def scenario() -> tuple[list[Any], list[Any]]:
        async with alkstore.connect_async(pg_dsn, schema=schema_name) as store:
            await store.create_queue(Q)
            instrument(store, tracer_provider=provider)
            ids = [await store.send(Q, {"n": n}) for n in range(2)]

            async def one(job: alkstore.Job) -> None:
                return None

            worker = await store.work(Q, one, poll_interval=0.05)
            deadline = time.monotonic() + 20
            while len(named(spans, f"process {Q}")) < 2:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            await worker.stop()
            batch_ids = await store.send_many(Q, [{"data": 1}, {"data": 2}])

            async def many(jobs: list[alkstore.Job]) -> None:
                return None

            worker = await store.work(Q, many, batch=True, batch_size=2, poll_interval=0.05)
            while (await store.queue_stats(Q)).queued or len(named(spans, f"process {Q}")) < 3:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            await worker.stop()
            return ids, batch_ids

    ids, batch_ids = asyncio.run(scenario())
    check_links(spans, ids, batch_ids)


def test_a_context_given_by_the_caller_is_kept(
    pg_dsn: str, schema_name: str, exporter: Any
) -> None:
    _spans, provider = exporter
    mine = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue(Q)
        store.subscribe("evt", Q)
        instrument(store, tracer_provider=provider)
        own = store.send(Q, 1, trace_context=mine)
        (published,) = store.publish("evt", 2)
        assert own is not None
        assert store.get_job(Q, own).trace_context == mine  # type: ignore[union-attr]
        carried = store.get_job(Q, published).trace_context  # type: ignore[union-attr]
        assert carried is not None and carried != mine
