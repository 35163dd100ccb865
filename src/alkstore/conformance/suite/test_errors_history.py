"""Attempt history: ``Job.errors`` keeps every failed attempt's error, bounded
(docs/workers.md, "Attempt history")."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from alkstore import FailedAttempt, Job, JobState, MetadataNotFetched
from alkstore.core.attempts import MAX_ERRORS, MAX_MESSAGE, MAX_STACK

from .conftest import make_queue


def _fail_with(store: Any, queue: str, job: Job, message: str) -> None:
    try:
        raise ValueError(message)
    except ValueError as exc:
        assert store.fail(queue, job, exc) == 1


@pytest.mark.parametrize("partition", [False, True])
def test_every_failed_attempt_is_kept_oldest_first(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, retry_limit=2)
    job_id = alkstore_store.send("q", 1)
    assert alkstore_store.get_job("q", job_id).errors == ()
    for attempt in range(3):
        (job,) = alkstore_store.fetch("q", ignore_start_after=True)
        _fail_with(alkstore_store, "q", job, f"boom {attempt}")
    job = alkstore_store.get_job("q", job_id)
    assert job.state is JobState.FAILED
    assert [(e.attempt, e.name, e.message) for e in job.errors] == [
        (1, "ValueError", "boom 0"),
        (2, "ValueError", "boom 1"),
        (3, "ValueError", "boom 2"),
    ]
    assert all(isinstance(e, FailedAttempt) for e in job.errors)
    assert all("ValueError: boom" in e.stack and "Traceback" in e.stack for e in job.errors)
    times = [e.at for e in job.errors]
    assert times == sorted(times) and all(t.tzinfo is dt.UTC for t in times)
    assert job.started_on - dt.timedelta(seconds=5) <= times[-1] <= job.completed_on


def test_history_stays_when_a_retry_completes(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=3)
    job_id = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    alkstore_store.fail("q", job, {"name": "Busy", "message": "try later", "code": 7})
    (job,) = alkstore_store.fetch("q", ignore_start_after=True)
    assert alkstore_store.complete("q", job, {"ok": True}) == 1
    done = alkstore_store.get_job("q", job_id)
    assert done.state is JobState.COMPLETED and done.output == {"ok": True}
    assert [(e.attempt, e.name, e.message, e.stack) for e in done.errors] == [
        (1, "Busy", "try later", None)
    ]


def test_an_error_value_that_is_no_exception_is_the_message(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=3)
    job_id = alkstore_store.send("q", 1)
    for error in ("plain text", {"detail": [1, 2]}, None):
        (job,) = alkstore_store.fetch("q", ignore_start_after=True)
        alkstore_store.fail("q", job, error)
    errors = alkstore_store.get_job("q", job_id).errors
    assert [(e.name, e.message, e.stack) for e in errors] == [
        (None, "plain text", None),
        (None, None, None),
        (None, None, None),
    ]


def test_manual_retry_keeps_the_history(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    job_id = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    _fail_with(alkstore_store, "q", job, "first")
    assert alkstore_store.retry("q", job_id) == 1
    (job,) = alkstore_store.fetch("q")
    _fail_with(alkstore_store, "q", job, "second")
    errors = alkstore_store.get_job("q", job_id).errors
    assert [(e.attempt, e.message) for e in errors] == [(1, "first"), (2, "second")]


def test_the_dead_letter_copy_carries_the_history(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q", retry_limit=1, dead_letter="dlq")
    job_id = alkstore_store.send("q", {"n": 1})
    for message in ("one", "two"):
        (job,) = alkstore_store.fetch("q", ignore_start_after=True)
        _fail_with(alkstore_store, "q", job, message)
    source = alkstore_store.get_job("q", job_id)
    (copy,) = alkstore_store.fetch("dlq", include_metadata=True)
    assert copy.source_id == job_id
    assert copy.errors == source.errors
    assert [e.message for e in copy.errors] == ["one", "two"]
    _fail_with(alkstore_store, "dlq", copy, "in the dlq")
    grown = alkstore_store.get_job("dlq", copy.id).errors
    assert [e.message for e in grown] == ["one", "two", "in the dlq"]


def test_history_is_bounded_to_the_latest_attempts(alkstore_store):
    attempts = MAX_ERRORS + 3
    alkstore_store.create_queue("q", retry_limit=attempts)
    job_id = alkstore_store.send("q", 1)
    for n in range(attempts):
        (job,) = alkstore_store.fetch("q", ignore_start_after=True)
        alkstore_store.fail("q", job, {"message": f"m{n}"})
    errors = alkstore_store.get_job("q", job_id).errors
    assert len(errors) == MAX_ERRORS
    assert [e.attempt for e in errors] == list(range(4, attempts + 1))
    assert errors[-1].message == f"m{attempts - 1}"


def test_long_messages_and_stacks_are_cut(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    job_id = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    stack = "frame\n" * MAX_STACK + "ValueError: the end"
    alkstore_store.fail("q", job, {"name": "E", "message": "m" * (MAX_MESSAGE * 2), "stack": stack})
    (error,) = alkstore_store.get_job("q", job_id).errors
    assert error.message.startswith("m" * MAX_MESSAGE) and len(error.message) == MAX_MESSAGE + 1
    assert error.stack.endswith("ValueError: the end") and len(error.stack) == MAX_STACK + 1
    assert alkstore_store.get_job("q", job_id).output["stack"] == stack  # output keeps it all


def test_expiry_is_an_attempt_error(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=1, expire_seconds=5)
    job_id = alkstore_store.send("q", 1)
    alkstore_store.fetch("q")
    alkstore_store.advance(10)
    assert alkstore_store.maintain().expired == 1
    (error,) = alkstore_store.get_job("q", job_id).errors
    assert (error.attempt, error.name, error.message) == (1, None, "job timed out")


def test_a_lean_fetch_leaves_the_history_out(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=1)
    alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    alkstore_store.fail("q", job, "x")
    (lean,) = alkstore_store.fetch("q", ignore_start_after=True)
    with pytest.raises(MetadataNotFetched):
        _ = lean.errors
    alkstore_store.fail("q", lean, "y")
    alkstore_store.retry("q", lean.id)
    (full,) = alkstore_store.fetch("q", include_metadata=True)
    assert [e.message for e in full.errors] == ["x", "y"]
