"""Job ids (UUIDv7, strictly increasing) and the normalisation of an operation's ``ids``."""

from __future__ import annotations

import datetime as dt
import threading
import time
import types
import uuid
from itertools import pairwise
from typing import Any

import pytest

from alkstore.core import ids as ids_module
from alkstore.core.errors import InvalidOptions
from alkstore.core.ids import new_id, new_ids
from alkstore.core.records import Job
from alkstore.core.states import JobState
from alkstore.core.targets import Targets, targets

T0 = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def make_job(**overrides: Any) -> Job:
    fields: dict[str, Any] = {
        "id": uuid.UUID("0190b4c2-7e1f-7a3b-8c4d-5e6f7a8b9c0d"),
        "queue": "jobs",
        "data": {"n": 1},
        "state": JobState.ACTIVE,
        "priority": 0,
        "retry_count": 3,
        "retry_limit": 5,
        "retry_delay": 0,
        "retry_backoff": False,
        "retry_delay_max": None,
        "expire_seconds": 900,
        "heartbeat_seconds": None,
        "retention_seconds": 14 * 86_400,
        "deletion_seconds": 7 * 86_400,
        "singleton_key": None,
        "group_id": None,
        "group_tier": None,
        "start_after": T0,
        "created_on": T0,
        "started_on": T0 + dt.timedelta(seconds=7),
        "completed_on": None,
        "heartbeat_on": None,
        "keep_until": T0 + dt.timedelta(days=14),
        "output": None,
        "source_queue": None,
        "source_id": None,
        "source_retry_count": None,
        "source_root_id": None,
        "source_created_on": None,
        "source_output": None,
        "dead_letter": None,
    }
    fields.update(overrides)
    return Job(**fields)


# --------------------------------------------------------------------------- new_id


def test_new_id_is_a_version_7_rfc_uuid() -> None:
    value = new_id()
    assert type(value) is uuid.UUID
    assert value.version == 7
    assert value.variant == uuid.RFC_4122


def test_new_id_carries_the_current_unix_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    value = new_id()
    after = time.time_ns() // 1_000_000
    assert before <= value.int >> 80 <= after


def test_new_id_strictly_increases_over_100k_calls() -> None:
    made = [new_id() for _ in range(100_000)]
    assert all(a < b for a, b in pairwise(made))
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in made)
    # String order is the same as UUID order (fixed-width lowercase hex), as databases sort.
    assert [str(u) for u in made] == sorted(str(u) for u in made)


def test_new_ids_of_a_batch_increase_and_follow_every_earlier_id() -> None:
    made = [new_id(), *new_ids(5000), new_id(), *new_ids(1), *new_ids(3)]
    assert len(made) == 5006
    assert all(a < b for a, b in pairwise(made))
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in made)
    assert new_ids(0) == []


def test_new_ids_are_ordinary_uuids() -> None:
    for made in new_ids(50):
        twin = uuid.UUID(str(made))
        assert made == twin and hash(made) == hash(twin)
        assert made.bytes == twin.bytes and repr(made) == repr(twin)
        assert made.is_safe is uuid.SafeUUID.unknown
        with pytest.raises(TypeError):
            made.int = 1  # type: ignore[misc]


def test_new_id_strictly_increases_when_the_clock_stands_still_or_goes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = new_id()
    # A clock far in the past (never in the future: that would leak into later ids).
    clock = iter([10**15, 10**15, 10**15, 5 * 10**14, 10**9] + [10**9] * 1000)
    monkeypatch.setattr(ids_module, "time", types.SimpleNamespace(time_ns=lambda: next(clock)))
    made = [first] + [new_id() for _ in range(1000)]
    assert all(a < b for a, b in pairwise(made))
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in made)


def test_new_id_is_unique_and_ordered_across_threads() -> None:
    per_thread = 25_000
    barrier = threading.Barrier(4)
    results: list[list[uuid.UUID]] = [[] for _ in range(4)]

    def work(out: list[uuid.UUID]) -> None:
        barrier.wait()
        out.extend(new_id() for _ in range(per_thread))

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for made in results:
        assert len(made) == per_thread
        assert all(a < b for a, b in pairwise(made))
    everything = [u for made in results for u in made]
    assert len(set(everything)) == 4 * per_thread


# --------------------------------------------------------------------------- targets

A = uuid.UUID("0190b4c2-7e1f-7a3b-8c4d-000000000001")
B = uuid.UUID("0190b4c2-7e1f-7a3b-8c4d-000000000002")


def test_one_uuid() -> None:
    got = targets(A)
    assert got == Targets(ids=[A], retry_counts=[None])
    assert len(got) == 1


@pytest.mark.parametrize("text", [str(A), str(A).upper(), A.hex, "{" + str(A) + "}"])
def test_one_uuid_string(text: str) -> None:
    got = targets(text)
    assert got.ids == [A]
    assert type(got.ids[0]) is uuid.UUID
    assert got.retry_counts == [None]


def test_a_job_is_fenced_to_its_attempt() -> None:
    job = make_job(id=B, retry_count=4, started_on=T0 + dt.timedelta(minutes=3))
    got = targets(job)
    assert got.ids == [B]
    assert got.retry_counts == [4]


def test_a_job_never_started_is_fenced_to_its_first_attempt() -> None:
    job = make_job(state=JobState.CREATED, retry_count=0, started_on=None)
    assert targets(job).retry_counts == [0]


def test_a_mixed_iterable_keeps_order_and_parallel_arrays() -> None:
    job = make_job(id=B, retry_count=1, started_on=T0)
    c = uuid.UUID(int=3)
    got = targets([A, str(c), job])
    assert got.ids == [A, c, B]
    assert got.retry_counts == [None, None, 1]
    assert len(got) == 3


@pytest.mark.parametrize(
    "make", [tuple, iter, lambda xs: (x for x in xs)], ids=["tuple", "iterator", "generator"]
)
def test_any_iterable_is_accepted(make: Any) -> None:
    got = targets(make([A, str(B)]))
    assert got.ids == [A, B]
    assert got.retry_counts == [None, None]


def test_an_empty_iterable_gives_no_targets() -> None:
    got = targets([])
    assert len(got) == 0
    assert got == Targets(ids=[], retry_counts=[])


@pytest.mark.parametrize(
    "value", [123, None, 1.5, True, "nope", "", str(A) + "x", object()], ids=repr
)
def test_a_bad_single_value_names_ids(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        targets(value)  # type: ignore[arg-type]
    assert info.value.field == "ids"
    assert info.value.value is value
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("bad", [5, None, "nope", 1.5, A.bytes, [A], {"id": A}, object()], ids=repr)
def test_a_bad_element_names_ids_and_the_element(bad: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        targets([A, bad, B])  # type: ignore[list-item]
    assert info.value.field == "ids"
    assert info.value.value is bad


def test_bytes_are_not_an_id() -> None:
    with pytest.raises(InvalidOptions) as info:
        targets(A.bytes)  # type: ignore[arg-type]
    assert info.value.field == "ids"
