"""The sender's trace context carried inside the job (docs/observability.md): stored by every
way of sending, kept by a retry, a dead-letter copy and a redrive, validated at the edge."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import InvalidOptions, JobState

CONTEXT = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "vendor=opaque<&>'\"",
}
OTHER = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}


def test_every_way_of_sending_stores_the_trace_context(alkstore_store: Any) -> None:
    store = alkstore_store
    for name in ("q", "q2"):
        store.create_queue(name)
    one = store.send("q", {"n": 1}, trace_context=CONTEXT)
    plain = store.send("q", {"n": 2})
    many = store.send_many(
        "q",
        [{"data": 3, "trace_context": CONTEXT}, {"data": 4}, {"data": 5, "trace_context": OTHER}],
    )
    flow = store.flow(
        [
            {"ref": "a", "queue": "q", "trace_context": CONTEXT},
            {"ref": "b", "queue": "q2", "depends_on": ["a"], "trace_context": OTHER},
        ]
    )
    store.subscribe("e", "q2")
    (published,) = store.publish("e", {"n": 6}, trace_context=CONTEXT)
    upserted = store.upsert("q2", 7, singleton_key="k", trace_context=OTHER)
    expected = {
        ("q", one): CONTEXT,
        ("q", plain): None,
        ("q", many[0]): CONTEXT,
        ("q", many[1]): None,
        ("q", many[2]): OTHER,
        ("q", flow["a"]): CONTEXT,
        ("q2", flow["b"]): OTHER,
        ("q2", published): CONTEXT,
        ("q2", upserted): OTHER,
    }
    for (queue, job_id), context in expected.items():
        assert job_id is not None
        assert store.get_job(queue, job_id).trace_context == context, (queue, job_id)
    fetched = {job.id: job.trace_context for job in store.fetch("q", batch_size=10)}
    assert fetched == {i: c for (q, i), c in expected.items() if q == "q"}


def test_a_retry_a_dead_letter_copy_and_a_redrive_keep_the_trace_context(
    alkstore_store: Any,
) -> None:
    store = alkstore_store
    store.create_queue("dlq", retry_limit=0)
    store.create_queue("q", retry_limit=1, dead_letter="dlq")
    job_id = store.send("q", {"n": 1}, trace_context=CONTEXT)
    for attempt in range(2):
        (job,) = store.fetch("q")
        assert job.id == job_id and job.retry_count == attempt
        assert job.trace_context == CONTEXT
        assert store.fail("q", job, "boom") == 1
    assert store.get_job("q", job_id).state is JobState.FAILED
    (copy,) = store.fetch("dlq", include_metadata=True)
    assert copy.source_id == job_id and copy.trace_context == CONTEXT
    assert store.fail("dlq", copy, "again") == 1
    store.create_queue("dlq2", retry_limit=0)
    assert store.retry("dlq", copy.id) == 1  # failed -> retry, in place
    assert store.redrive("dlq", to="dlq2") == 1
    (moved,) = store.fetch("dlq2", include_metadata=True)
    assert moved.trace_context == CONTEXT


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("00-abc", "trace_context"),
        ({"traceparent": 1}, "trace_context['traceparent']"),
        ({1: "x"}, "trace_context"),
        ({"": "x"}, "trace_context"),
        ({f"k{i}": "v" for i in range(9)}, "trace_context"),
        ({"traceparent": "x" * 1025}, "trace_context['traceparent']"),
        ({"traceparent": "a\x00b"}, "trace_context['traceparent']"),
    ],
)
def test_a_bad_trace_context_is_refused_before_anything_is_written(
    alkstore_store: Any, value: Any, field: str
) -> None:
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as info:
        alkstore_store.send("q", 1, trace_context=value)
    assert info.value.field == field
    with pytest.raises(InvalidOptions):
        alkstore_store.send_many("q", [{"data": 1}, {"data": 2, "trace_context": value}])
    assert alkstore_store.queue_stats("q").total == 0
    assert alkstore_store.send("q", 1, trace_context={}) is not None  # nothing to carry
    (job,) = alkstore_store.fetch("q")
    assert job.trace_context is None
