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
def test_payload_round_trips(store, data):
    store.create_queue("q")
    job_id = store.send("q", data)
    job = store.get_job("q", job_id)
    assert job.data == data
    assert store.fetch("q")[0].data == data


def test_new_job_has_queue_defaults_and_created_state(store):
    store.create_queue("q", retry_limit=4, retry_delay=2, expire_seconds=60, deletion_seconds=5)
    job = store.get_job("q", store.send("q", {"a": 1}))
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


def test_job_options_override_queue_options(store):
    store.create_queue("q", retry_limit=4, retry_backoff=True, retry_delay_max=100)
    job_id = store.send(
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
    job = store.get_job("q", job_id)
    assert (job.retry_limit, job.retry_delay, job.retry_backoff, job.retry_delay_max) == (
        0,
        7,
        True,
        100,
    )
    assert (job.expire_seconds, job.heartbeat_seconds, job.deletion_seconds) == (11, 30, 0)
    assert job.keep_until - job.start_after == dt.timedelta(hours=1)
    assert (job.priority, job.singleton_key, job.group_id, job.group_tier) == (5, "k", "g", "gold")


def test_caller_chosen_id_is_kept(store):
    store.create_queue("q")
    chosen = uuid.uuid4()
    assert store.send("q", 1, id=chosen) == chosen
    assert store.send("q", 2, id=str(uuid.uuid4())) is not None
    assert store.get_job("q", chosen).data == 1


def test_duplicate_id_raises_job_conflict_and_keeps_the_first(store):
    store.create_queue("q")
    chosen = uuid.uuid4()
    store.send("q", "first", id=chosen)
    with pytest.raises(JobConflict):
        store.send("q", "second", id=chosen)
    assert store.get_job("q", chosen).data == "first"
    assert store.job_count() == 1


def test_send_many_is_all_or_nothing_on_a_duplicate(store):
    store.create_queue("q")
    taken = store.send("q", "taken")
    with pytest.raises(JobConflict):
        store.send_many("q", [{"data": 1}, {"data": 2, "id": taken}, {"data": 3}])
    assert store.job_count() == 1
    with pytest.raises(JobConflict):
        dup = uuid.uuid4()
        store.send_many("q", [{"data": 1, "id": dup}, {"data": 2, "id": dup}])
    assert store.job_count() == 1


def test_send_to_unknown_queue_raises(store):
    with pytest.raises(QueueNotFound) as err:
        store.send("nope", {})
    assert err.value.name == "nope"
    with pytest.raises(QueueNotFound):
        store.send_many("nope", [{"data": 1}])
    assert store.job_count() == 0


def test_send_many_returns_ids_in_order_and_fetch_keeps_that_order(store):
    store.create_queue("q")
    ids = store.send_many("q", [{"data": i} for i in range(3000)])
    assert len(ids) == len(set(ids)) == 3000
    fetched = store.fetch("q", batch_size=3000)
    assert [j.id for j in fetched] == ids
    assert [j.data for j in fetched] == list(range(3000))


def test_send_many_with_per_job_options(store):
    store.create_queue("q")
    ids = store.send_many("q", [{"data": "low"}, {"data": "high", "priority": 10}, {"priority": 5}])
    assert [j.id for j in store.fetch("q", batch_size=3)] == [ids[1], ids[2], ids[0]]
    assert store.get_job("q", ids[2]).data is None


def test_send_many_empty_list(store):
    store.create_queue("q")
    assert store.send_many("q", []) == []


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
def test_invalid_job_option_names_field_and_writes_nothing(store, option, value):
    store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        store.send("q", {"x": 1}, **{option: value})
    assert err.value.field == option
    assert err.value.value == value or (value != value)
    assert option in str(err.value)
    with pytest.raises(InvalidOptions):
        store.send_many("q", [{"data": 1}, {"data": 2, option: value}])
    assert store.job_count() == 0


def test_non_json_data_is_refused_and_writes_nothing(store):
    store.create_queue("q")
    for bad in ({1, 2}, object(), {"nan": float("nan")}, b"bytes"):
        with pytest.raises(InvalidOptions) as err:
            store.send("q", bad)
        assert err.value.field == "data"
        with pytest.raises(InvalidOptions):
            store.send_many("q", [{"data": 1}, {"data": bad}])
    assert store.job_count() == 0


def test_send_many_refuses_a_non_mapping_item(store):
    store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        store.send_many("q", [{"data": 1}, "not a mapping"])
    assert err.value.field == "jobs[1]"
    assert store.job_count() == 0


@pytest.mark.parametrize("delay", [3600, dt.timedelta(hours=1)])
def test_start_after_relative_delays_fetching(store, delay):
    store.create_queue("q")
    job_id = store.send("q", 1, start_after=delay)
    assert store.fetch("q") == []
    job = store.get_job("q", job_id)
    assert (
        dt.timedelta(minutes=59)
        < job.start_after - job.created_on
        <= dt.timedelta(hours=1, seconds=5)
    )
    store.advance(3601)
    assert [j.id for j in store.fetch("q")] == [job_id]


def test_start_after_absolute_datetime(store):
    store.create_queue("q")
    when = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    job_id = store.send("q", 1, start_after=when)
    assert store.get_job("q", job_id).start_after == when
    assert store.fetch("q") == []
    past = store.send("q", 2, start_after=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    assert [j.id for j in store.fetch("q")] == [past]
