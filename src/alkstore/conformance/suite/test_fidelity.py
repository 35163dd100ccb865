"""Fidelity fixes found by replaying pg-boss's behaviour (issue 12, item 7): dead-letter
lineage, the stack of a failure, resume keeping a pending retry delay, empty sends."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from alkstore import JobState, QueueNotFound

from .conftest import eventually


def _fail_for_good(alkstore_store: Any, queue: str, output: Any) -> Any:
    (job,) = alkstore_store.fetch(queue)
    assert alkstore_store.fail(queue, job, output) == 1
    return job


def test_dead_letter_copy_keeps_singleton_key_and_records_lineage(alkstore_store):
    alkstore_store.create_queue("dlq2")
    alkstore_store.create_queue("dlq", retry_limit=0, dead_letter="dlq2")
    alkstore_store.create_queue("q", retry_limit=0, dead_letter="dlq")
    job_id = alkstore_store.send("q", {"n": 1}, singleton_key="k1")
    source = alkstore_store.get_job("q", job_id)
    _fail_for_good(alkstore_store, "q", {"reason": "first"})

    (copy,) = alkstore_store.fetch("dlq", include_metadata=True)
    assert copy.singleton_key == "k1"
    assert (copy.source_queue, copy.source_id, copy.source_root_id) == ("q", job_id, job_id)
    assert copy.source_created_on == source.created_on
    assert copy.source_output == {"reason": "first"} == copy.output
    assert copy.data == {"n": 1}

    # The copy fails in turn: the second copy names it as source and the first job as root.
    assert alkstore_store.fail("dlq", copy, {"reason": "second"}) == 1
    (second,) = alkstore_store.fetch("dlq2", include_metadata=True)
    assert (second.source_queue, second.source_id, second.source_root_id) == (
        "dlq",
        copy.id,
        job_id,
    )
    assert second.source_created_on == copy.created_on
    assert second.source_output == {"reason": "second"}
    assert second.singleton_key == "k1"


def test_a_job_that_is_not_a_dead_letter_has_no_lineage(alkstore_store):
    alkstore_store.create_queue("q")
    job = alkstore_store.get_job("q", alkstore_store.send("q", 1))
    assert (job.source_root_id, job.source_created_on, job.source_output) == (None, None, None)


def test_fail_without_an_exception_stores_the_value_as_given(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    job_id = alkstore_store.send("q", 1)
    alkstore_store.fail("q", job_id, {"code": 7})
    assert alkstore_store.get_job("q", job_id).output == {"code": 7}


def test_fail_of_an_exception_never_raised_still_has_a_stack(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    job_id = alkstore_store.send("q", 1)
    alkstore_store.fail("q", job_id, KeyError("missing"))
    output = alkstore_store.get_job("q", job_id).output
    assert output["name"] == "KeyError" and "KeyError: 'missing'" in output["stack"]


def test_resume_after_cancel_keeps_a_pending_retry_delay(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=3, retry_delay=60)
    job_id = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    alkstore_store.fail("q", job, "boom")
    waiting = alkstore_store.get_job("q", job_id)
    assert waiting.state is JobState.RETRY
    assert alkstore_store.cancel("q", job_id) == 1
    assert alkstore_store.resume("q", job_id) == 1
    resumed = alkstore_store.get_job("q", job_id)
    assert resumed.state is JobState.CREATED
    assert resumed.start_after == waiting.start_after
    assert resumed.keep_until == waiting.keep_until
    assert alkstore_store.fetch("q") == []
    alkstore_store.advance(61)
    (again,) = alkstore_store.fetch("q")
    assert again.id == job_id and again.retry_count == 1


def test_resume_of_a_job_whose_start_has_passed_runs_it_now(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1, start_after=30)
    alkstore_store.cancel("q", job_id)
    alkstore_store.advance(40)
    before = alkstore_store.get_job("q", job_id).start_after
    assert alkstore_store.resume("q", job_id) == 1
    resumed = alkstore_store.get_job("q", job_id)
    assert resumed.start_after > before
    assert resumed.keep_until - resumed.start_after == dt.timedelta(
        seconds=resumed.retention_seconds
    )
    assert [j.id for j in alkstore_store.fetch("q")] == [job_id]


def test_empty_send_many_to_a_missing_queue_raises(alkstore_store):
    with pytest.raises(QueueNotFound) as caught:
        alkstore_store.send_many("nowhere", [])
    assert caught.value.name == "nowhere"
    alkstore_store.create_queue("q")
    assert alkstore_store.send_many("q", []) == []


def _next_millisecond(after: int) -> int:
    """The wall clock's millisecond once it is past ``after`` (so that the next row the
    database makes is stamped later than the last)."""
    return eventually(lambda: time.time_ns() // 1_000_000 > after and time.time_ns() // 1_000_000)


def test_dead_letter_redriven_and_published_copies_get_time_ordered_ids(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q", retry_limit=0, dead_letter="dlq")
    sources = alkstore_store.send_many("q", [{"data": n} for n in (1, 2, 3)])
    # Failed in reverse send order: the copies' ids follow the failures, not the sources.
    millis = time.time_ns() // 1_000_000
    for source in reversed(sources):
        millis = _next_millisecond(millis)
        assert alkstore_store.fail("q", source, {"n": 1}) == 1
        millis = time.time_ns() // 1_000_000
    copies = alkstore_store.list_jobs("dlq")
    assert all(c.id.version == 7 for c in copies)
    by_id = sorted(copies, key=lambda c: c.id)
    assert [c.source_id for c in by_id] == list(reversed(sources))
    _next_millisecond(millis)
    assert alkstore_store.redrive("dlq") == 3
    redriven = alkstore_store.list_jobs("q", states=["created"])
    assert len(redriven) == 3
    assert all(j.id.version == 7 and j.id > max(c.id for c in copies) for j in redriven)
    alkstore_store.subscribe("done", "q")
    _next_millisecond(time.time_ns() // 1_000_000)
    (published,) = alkstore_store.publish("done", None)
    assert published.version == 7 and published > max(j.id for j in redriven)
