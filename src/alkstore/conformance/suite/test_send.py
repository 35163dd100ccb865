"""Sending jobs: option resolution, payloads, ordering, and refusals that write nothing."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from alkstore import InvalidOptions, JobConflict, JobState, QueueNotFound

PAYLOADS = [
    None,
    0,
    -1.5,
    "text with 'quotes' and ünïcødé ✓",
    [1, "two", None, {"three": [3]}],
    {"nested": {"deep": {"list": [1, 2, {"x": None}]}}, "bool": True, "big": 2**53},
    {"percent": "100% sure $1 ?", "sql": "'; DROP TABLE job; --"},
]


@pytest.mark.parametrize("data", PAYLOADS)
def test_payload_round_trips(alkstore_store, data):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", data)
    job = alkstore_store.get_job("q", job_id)
    assert job.data == data
    assert alkstore_store.fetch("q")[0].data == data


def test_new_job_has_queue_defaults_and_created_state(alkstore_store):
    alkstore_store.create_queue(
        "q", retry_limit=4, retry_delay=2, expire_seconds=60, deletion_seconds=5
    )
    job = alkstore_store.get_job("q", alkstore_store.send("q", {"a": 1}))
    assert job.state is JobState.CREATED
    assert (job.retry_limit, job.retry_delay, job.expire_seconds, job.deletion_seconds) == (
        4,
        2,
        60,
        5,
    )
    assert job.retry_count == 0 and job.priority == 0
    assert job.started_on is None and job.completed_on is None and job.output is None
    assert job.keep_until - job.start_after == dt.timedelta(days=14)


def test_job_options_override_queue_options(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=4, retry_backoff=True, retry_delay_max=100)
    job_id = alkstore_store.send(
        "q",
        None,
        retry_limit=0,
        retry_delay=7,
        expire_seconds=11,
        heartbeat_seconds=30,
        retention_seconds=3600,
        deletion_seconds=0,
        priority=5,
        singleton_key="k",
        group_id="g",
        group_tier="gold",
    )
    job = alkstore_store.get_job("q", job_id)
    assert (job.retry_limit, job.retry_delay, job.retry_backoff, job.retry_delay_max) == (
        0,
        7,
        True,
        100,
    )
    assert (job.expire_seconds, job.heartbeat_seconds, job.deletion_seconds) == (11, 30, 0)
    assert job.keep_until - job.start_after == dt.timedelta(hours=1)
    assert (job.priority, job.singleton_key, job.group_id, job.group_tier) == (5, "k", "g", "gold")


def test_caller_chosen_id_is_kept(alkstore_store):
    alkstore_store.create_queue("q")
    chosen = uuid.uuid4()
    assert alkstore_store.send("q", 1, id=chosen) == chosen
    assert alkstore_store.send("q", 2, id=str(uuid.uuid4())) is not None
    assert alkstore_store.get_job("q", chosen).data == 1


def test_duplicate_id_raises_job_conflict_and_keeps_the_first(alkstore_store):
    alkstore_store.create_queue("q")
    chosen = uuid.uuid4()
    alkstore_store.send("q", "first", id=chosen)
    with pytest.raises(JobConflict):
        alkstore_store.send("q", "second", id=chosen)
    assert alkstore_store.get_job("q", chosen).data == "first"
    assert alkstore_store.job_count() == 1


def test_send_many_is_all_or_nothing_on_a_duplicate(alkstore_store):
    alkstore_store.create_queue("q")
    taken = alkstore_store.send("q", "taken")
    with pytest.raises(JobConflict):
        alkstore_store.send_many("q", [{"data": 1}, {"data": 2, "id": taken}, {"data": 3}])
    assert alkstore_store.job_count() == 1
    with pytest.raises(JobConflict):
        dup = uuid.uuid4()
        alkstore_store.send_many("q", [{"data": 1, "id": dup}, {"data": 2, "id": dup}])
    assert alkstore_store.job_count() == 1


def test_send_to_unknown_queue_raises(alkstore_store):
    with pytest.raises(QueueNotFound) as err:
        alkstore_store.send("nope", {})
    assert err.value.name == "nope"
    with pytest.raises(QueueNotFound):
        alkstore_store.send_many("nope", [{"data": 1}])
    assert alkstore_store.job_count() == 0


def test_send_many_returns_ids_in_order_and_fetch_keeps_that_order(alkstore_store):
    alkstore_store.create_queue("q")
    ids = alkstore_store.send_many("q", [{"data": i} for i in range(3000)])
    assert len(ids) == len(set(ids)) == 3000
    fetched = alkstore_store.fetch("q", batch_size=3000)
    assert [j.id for j in fetched] == ids
    assert [j.data for j in fetched] == list(range(3000))


def test_send_many_with_per_job_options(alkstore_store):
    alkstore_store.create_queue("q")
    ids = alkstore_store.send_many(
        "q", [{"data": "low"}, {"data": "high", "priority": 10}, {"priority": 5}]
    )
    assert [j.id for j in alkstore_store.fetch("q", batch_size=3)] == [ids[1], ids[2], ids[0]]
    assert alkstore_store.get_job("q", ids[2]).data is None


def test_send_many_empty_list(alkstore_store):
    alkstore_store.create_queue("q")
    assert alkstore_store.send_many("q", []) == []


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("retry_limit", -1),
        ("retry_limit", "3"),
        ("retry_limit", True),
        ("retry_delay", -5),
        ("retry_delay", 1.5),
        ("retry_backoff", "yes"),
        ("retry_delay_max", -1),
        ("expire_seconds", 0),
        ("heartbeat_seconds", 5),
        ("retention_seconds", 0),
        ("deletion_seconds", -1),
        ("priority", 1.5),
        ("start_after", -1),
        ("start_after", "tomorrow"),
        ("start_after", dt.datetime(2030, 1, 1)),  # naive
        ("id", "not-a-uuid"),
        ("singleton_key", ""),
        ("no_such_option", 1),
    ],
)
def test_invalid_job_option_names_field_and_writes_nothing(alkstore_store, option, value):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.send("q", {"x": 1}, **{option: value})
    assert err.value.field == option
    assert err.value.value == value or (value != value)
    assert option in str(err.value)
    with pytest.raises(InvalidOptions):
        alkstore_store.send_many("q", [{"data": 1}, {"data": 2, option: value}])
    assert alkstore_store.job_count() == 0


def test_non_json_data_is_refused_and_writes_nothing(alkstore_store):
    alkstore_store.create_queue("q")
    for bad in ({1, 2}, object(), {"nan": float("nan")}, b"bytes"):
        with pytest.raises(InvalidOptions) as err:
            alkstore_store.send("q", bad)
        assert err.value.field == "data"
        with pytest.raises(InvalidOptions):
            alkstore_store.send_many("q", [{"data": 1}, {"data": bad}])
    assert alkstore_store.job_count() == 0


def test_send_many_refuses_a_non_mapping_item(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.send_many("q", [{"data": 1}, "not a mapping"])
    assert err.value.field == "jobs[1]"
    assert alkstore_store.job_count() == 0


@pytest.mark.parametrize("delay", [3600, dt.timedelta(hours=1)])
def test_start_after_relative_delays_fetching(alkstore_store, delay):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1, start_after=delay)
    assert alkstore_store.fetch("q") == []
    job = alkstore_store.get_job("q", job_id)
    assert (
        dt.timedelta(minutes=59)
        < job.start_after - job.created_on
        <= dt.timedelta(hours=1, seconds=5)
    )
    alkstore_store.advance(3601)
    assert [j.id for j in alkstore_store.fetch("q")] == [job_id]


def test_start_after_absolute_datetime(alkstore_store):
    alkstore_store.create_queue("q")
    when = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    job_id = alkstore_store.send("q", 1, start_after=when)
    assert alkstore_store.get_job("q", job_id).start_after == when
    assert alkstore_store.fetch("q") == []
    past = alkstore_store.send("q", 2, start_after=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    assert [j.id for j in alkstore_store.fetch("q")] == [past]
