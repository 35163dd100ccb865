"""Rows from any engine/driver pair normalise to identical records (Job, Queue, QueueStats)."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore.core.options import Policy, QueueOptions
from alkstore.core.records import Job, MaintenanceReport, Queue, QueueStats, as_time
from alkstore.core.states import JobState

ID = uuid.UUID("0190b4c2-7e1f-7a3b-8c4d-5e6f7a8b9c0d")
SOURCE_ID = uuid.UUID("0190b4c2-7e1f-7a3b-8c4d-00000000beef")
T0 = dt.datetime(2030, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC)
PLUS_2 = dt.timezone(dt.timedelta(hours=2))

JOB_TIME_COLUMNS = ("start_after", "created_on", "started_on", "completed_on", "heartbeat_on")


def native_row(**overrides: Any) -> dict[str, Any]:
    """A job row as psycopg returns it: native Python types, JSON already as text."""
    row: dict[str, Any] = {
        "id": ID,
        "name": "jobs",
        "data": '{"n": [1, 2, {"x": null}]}',
        "state": "active",
        "priority": 3,
        "retry_count": 1,
        "retry_limit": 2,
        "retry_delay": 5,
        "retry_backoff": True,
        "retry_delay_max": 60,
        "expire_seconds": 900,
        "heartbeat_seconds": 30,
        "retention_seconds": 1_209_600,
        "deletion_seconds": 604_800,
        "singleton_key": "key",
        "group_id": "g",
        "group_tier": "gold",
        "start_after": T0,
        "created_on": T0 - dt.timedelta(seconds=1),
        "started_on": T0 + dt.timedelta(seconds=2),
        "completed_on": None,
        "heartbeat_on": T0 + dt.timedelta(seconds=3),
        "keep_until": T0 + dt.timedelta(days=14),
        "output": '{"message": "boom"}',
        "source_queue": "origin",
        "source_id": SOURCE_ID,
        "source_retry_count": 2,
        "source_root_id": SOURCE_ID,
        "source_created_on": T0 - dt.timedelta(days=1),
        "source_output": '{"message": "boom"}',
        "dead_letter": "dlq",
    }
    row.update(overrides)
    return row


def text_row() -> dict[str, Any]:
    """The same row as CockroachDB-over-text sends it: integers, bools, uuids and times as text."""
    row = native_row()
    for key in (
        "priority",
        "retry_count",
        "retry_limit",
        "retry_delay",
        "retry_delay_max",
        "expire_seconds",
        "heartbeat_seconds",
        "retention_seconds",
        "deletion_seconds",
        "source_retry_count",
    ):
        row[key] = str(row[key])
    row["retry_backoff"] = "t"
    row["id"] = str(ID)
    row["source_id"] = str(SOURCE_ID).upper()
    row["source_root_id"] = str(SOURCE_ID)
    row["source_created_on"] = "2030-01-01 03:04:05.123456+00"
    row["start_after"] = "2030-01-02 03:04:05.123456+00"
    row["created_on"] = "2030-01-02T05:04:04.123456+02:00"
    row["started_on"] = "2030-01-02 03:04:07.123456+00:00"
    row["heartbeat_on"] = "2030-01-02 03:04:08.123456Z"
    row["keep_until"] = (T0 + dt.timedelta(days=14)).astimezone(PLUS_2)
    return row


def assert_utc(value: dt.datetime | None) -> None:
    assert value is not None
    assert value.tzinfo is not None
    assert value.utcoffset() == dt.timedelta(0)


def test_native_row() -> None:
    job = Job.from_row(native_row())
    assert job.id == ID
    assert job.queue == "jobs"
    assert job.data == {"n": [1, 2, {"x": None}]}
    assert job.state is JobState.ACTIVE
    assert (job.priority, job.retry_count, job.retry_limit, job.retry_delay) == (3, 1, 2, 5)
    assert job.retry_backoff is True
    assert job.retry_delay_max == 60
    assert job.heartbeat_seconds == 30
    assert job.output == {"message": "boom"}
    assert job.source_id == SOURCE_ID
    assert job.completed_on is None


def test_text_row_normalises_to_the_same_job() -> None:
    from_text = Job.from_row(text_row())
    from_native = Job.from_row(native_row())
    assert from_text == from_native
    for name in (
        "priority",
        "retry_count",
        "retry_limit",
        "retry_delay",
        "retry_delay_max",
        "expire_seconds",
        "heartbeat_seconds",
        "retention_seconds",
        "deletion_seconds",
        "source_retry_count",
    ):
        assert type(getattr(from_text, name)) is int, name
    assert from_text.retry_backoff is True
    assert type(from_text.id) is uuid.UUID
    assert type(from_text.source_id) is uuid.UUID
    assert type(from_text.state) is JobState
    for name in (*JOB_TIME_COLUMNS, "keep_until"):
        value = getattr(from_text, name)
        if value is not None:
            assert_utc(value)
    assert from_text.created_on == T0 - dt.timedelta(seconds=1)
    assert from_text.keep_until == T0 + dt.timedelta(days=14)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(True, True), (False, False), ("t", True), ("f", False), ("true", True), ("false", False)],
)
def test_boolean_columns(raw: object, expected: bool) -> None:
    job = Job.from_row(native_row(retry_backoff=raw))
    assert job.retry_backoff is expected
    queue = Queue.from_row(queue_row(partition=raw, retry_backoff=True))
    assert queue.options.partition is expected


def test_nullable_columns_stay_none() -> None:
    job = Job.from_row(
        native_row(
            retry_delay_max=None,
            heartbeat_seconds=None,
            singleton_key=None,
            group_id=None,
            group_tier=None,
            started_on=None,
            heartbeat_on=None,
            output=None,
            data=None,
            source_queue=None,
            source_id=None,
            source_retry_count=None,
            source_root_id=None,
            source_created_on=None,
            source_output=None,
        )
    )
    assert job.retry_delay_max is None
    assert job.heartbeat_seconds is None
    assert job.started_on is None
    assert job.heartbeat_on is None
    assert job.output is None
    assert job.data is None
    assert job.source_id is None
    assert job.source_retry_count is None
    assert job.source_root_id is job.source_created_on is job.source_output is None


@pytest.mark.parametrize(
    ("text", "value"),
    [('"just text"', "just text"), ("[1, 2.5, true]", [1, 2.5, True]), ("null", None), ("0", 0)],
)
def test_json_text_columns(text: str, value: object) -> None:
    job = Job.from_row(native_row(data=text, output=text))
    assert job.data == value
    assert job.output == value


def test_a_driver_uuid_subclass_becomes_a_plain_uuid() -> None:
    class DriverUUID(uuid.UUID):
        """Stands for asyncpg's own UUID class."""

    job = Job.from_row(native_row(id=DriverUUID(str(ID)), source_id=DriverUUID(str(SOURCE_ID))))
    assert type(job.id) is uuid.UUID
    assert type(job.source_id) is uuid.UUID
    assert job.id == ID


def test_aware_times_are_converted_to_utc() -> None:
    row = native_row(**{name: T0.astimezone(PLUS_2) for name in JOB_TIME_COLUMNS})
    job = Job.from_row(row)
    for name in JOB_TIME_COLUMNS:
        value = getattr(job, name)
        assert value == T0, name
        assert_utc(value)
        assert value.hour == T0.hour, name


@pytest.fixture
def local_time_not_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run with the process's local time zone at UTC+05:30 (POSIX TZ, no tz database needed)."""
    monkeypatch.setenv("TZ", "IST-05:30")
    time.tzset()
    try:
        assert time.localtime(0).tm_gmtoff == 5 * 3600 + 30 * 60
        yield
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.usefixtures("local_time_not_utc")
@pytest.mark.parametrize(
    "naive",
    [dt.datetime(2030, 1, 2, 3, 4, 5, 123456), "2030-01-02 03:04:05.123456"],
    ids=["datetime", "iso-text"],
)
def test_naive_times_are_read_as_utc_whatever_the_local_zone(naive: object) -> None:
    """A naive timestamp from the database is UTC; the client's local zone must not shift it."""
    assert as_time(naive) == T0
    job = Job.from_row(native_row(start_after=naive, created_on=naive, keep_until=naive))
    assert job.start_after == T0
    assert job.created_on == T0
    assert job.keep_until == T0
    assert_utc(job.start_after)


def test_naive_times_are_read_as_utc() -> None:
    naive = dt.datetime(2030, 1, 2, 3, 4, 5, 123456)
    got = as_time(naive)
    assert got is not None
    assert_utc(got)
    assert as_time(None) is None


# --------------------------------------------------------------------------- Queue


def queue_row(**overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": "jobs",
        "policy": "standard",
        "retry_limit": "4",
        "retry_delay": "10",
        "retry_backoff": "t",
        "retry_delay_max": "300",
        "expire_seconds": "600",
        "heartbeat_seconds": None,
        "retention_seconds": "86400",
        "deletion_seconds": "0",
        "dead_letter": "dlq",
        "partition": "f",
        "created_on": "2030-01-02 03:04:05.123456+00",
        "updated_on": T0.astimezone(PLUS_2),
    }
    row.update(overrides)
    return row


def test_queue_from_row() -> None:
    queue = Queue.from_row(queue_row())
    assert queue.name == "jobs"
    assert queue.options == QueueOptions(
        retry_limit=4,
        retry_delay=10,
        retry_backoff=True,
        retry_delay_max=300,
        expire_seconds=600,
        heartbeat_seconds=None,
        retention_seconds=86_400,
        deletion_seconds=0,
        policy=Policy.STANDARD,
        dead_letter="dlq",
        partition=False,
    )
    assert queue.policy is Policy.STANDARD
    assert queue.dead_letter == "dlq"
    assert queue.created_on == T0
    assert queue.updated_on == T0
    assert_utc(queue.created_on)
    assert_utc(queue.updated_on)


def test_queue_from_native_row_equals_text_row() -> None:
    native = queue_row(
        retry_limit=4,
        retry_delay=10,
        retry_backoff=True,
        retry_delay_max=300,
        expire_seconds=600,
        retention_seconds=86_400,
        deletion_seconds=0,
        partition=False,
        created_on=T0,
        updated_on=T0,
    )
    assert Queue.from_row(native) == Queue.from_row(queue_row())


def test_queue_without_dead_letter() -> None:
    queue = Queue.from_row(
        queue_row(dead_letter=None, retry_backoff="f", retry_delay_max=None, heartbeat_seconds="30")
    )
    assert queue.dead_letter is None
    assert queue.options.retry_backoff is False
    assert queue.options.heartbeat_seconds == 30


# --------------------------------------------------------------------------- QueueStats


def test_queue_stats_queued_and_total() -> None:
    counts = {
        JobState.CREATED: 5,
        JobState.RETRY: 2,
        JobState.ACTIVE: 3,
        JobState.COMPLETED: 11,
        JobState.CANCELLED: 1,
        JobState.FAILED: 4,
    }
    stats = QueueStats("jobs", counts, dt.timedelta(seconds=9))
    assert stats.queued == 7
    assert stats.total == 26
    empty = QueueStats("jobs", dict.fromkeys(JobState, 0), None)
    assert (empty.queued, empty.total) == (0, 0)


def test_maintenance_report_defaults_to_nothing_done() -> None:
    report = MaintenanceReport()
    assert (report.expired, report.heartbeat_expired, report.retention_removed) == (0, 0, 0)
    assert report.deleted == 0


# --------------------------------------------------------------------------- sort_key

ENTRIES = st.lists(
    st.tuples(
        st.integers(-2, 2),
        st.sampled_from([T0, T0 + dt.timedelta(microseconds=1), T0 + dt.timedelta(days=1)]),
        st.uuids(),
    ),
    max_size=30,
    unique_by=lambda e: e[2],
)


@settings(max_examples=150, deadline=None)
@given(entries=ENTRIES)
def test_sort_key_orders_priority_desc_then_created_on_then_id(
    entries: list[tuple[int, dt.datetime, uuid.UUID]],
) -> None:
    jobs = [Job.from_row(native_row(priority=p, created_on=c, id=i)) for p, c, i in entries]
    # Oracle: stable sorts from the least significant key up; ids compared as 128-bit numbers,
    # the way the database orders a uuid column.
    expected = sorted(jobs, key=lambda j: j.id.int)
    expected.sort(key=lambda j: j.created_on)
    expected.sort(key=lambda j: j.priority, reverse=True)
    assert sorted(jobs, key=Job.sort_key) == expected


def test_sort_key_example() -> None:
    low = Job.from_row(native_row(priority=0, created_on=T0, id=uuid.UUID(int=1)))
    high_late = Job.from_row(
        native_row(priority=5, created_on=T0 + dt.timedelta(hours=1), id=uuid.UUID(int=2))
    )
    high_early_b = Job.from_row(native_row(priority=5, created_on=T0, id=uuid.UUID(int=0xB)))
    high_early_a = Job.from_row(native_row(priority=5, created_on=T0, id=uuid.UUID(int=0xA)))
    ordered = sorted([low, high_late, high_early_b, high_early_a], key=Job.sort_key)
    assert ordered == [high_early_a, high_early_b, high_late, low]


def test_a_lean_job_holds_each_column_in_its_own_field() -> None:
    from alkstore.core.lean import LEAN_FIELDS, LeanJob
    from alkstore.core.states import JobState
    from alkstore.core.tracecontext import trace_context_json

    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    created = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    # Distinct values, so that a field set from another column shows.
    same = {
        "id": uuid.UUID(int=7),
        "priority": 3,
        "retry_count": 4,
        "retry_limit": 5,
        "expire_seconds": 6,
        "heartbeat_seconds": 7,
        "singleton_key": "k",
        "group_id": "g",
        "group_tier": "t",
        "created_on": created,
    }
    row = {
        **same,
        "name": "q",
        "data": '{"n":1}',
        "state": "active",
        "trace_context": trace_context_json({"traceparent": parent}),
    }
    job = LeanJob.from_row(row)
    expected = {
        **same,
        "queue": "q",
        "data": {"n": 1},
        "state": JobState.ACTIVE,
        "trace_context": {"traceparent": parent},
    }
    assert {name: getattr(job, name) for name in LEAN_FIELDS} == expected
    assert LeanJob.of_job(job) == job
