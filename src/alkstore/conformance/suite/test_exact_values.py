"""Every text value reaches the server exactly: no string is ever taken for SQL NULL.

Drivers bind lists as arrays; where an array travels as a text literal (``{a,b}``), an element
``null`` (any case) unquoted means NULL, and quotes, commas, braces and backslashes change
the elements. These strings go through every text option of ``send`` and ``send_many`` and
must come back from ``get_job`` as sent.
"""

from __future__ import annotations

import pytest

from alkstore import JobState

HOSTILE = [
    "null",
    "NULL",
    "Null",
    "\\N",
    '"',
    "'",
    "a,b",
    "{x}",
    "{}",
    "\\",
    'a"b\\c',
    " padded ",
    "ünïcødé ✓ 日本",
    "(1,2)",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_strings_are_stored_exactly_by_send(store, value):
    store.create_queue("q")
    job_id = store.send("q", {"v": value}, singleton_key=value, group_id=value, group_tier=value)
    job = store.get_job("q", job_id)
    assert (job.singleton_key, job.group_id, job.group_tier) == (value, value, value)
    assert job.data == {"v": value}


def test_hostile_strings_are_stored_exactly_by_send_many(store):
    store.create_queue("q")
    ids = store.send_many(
        "q",
        [{"data": v, "singleton_key": v, "group_id": v, "group_tier": v} for v in HOSTILE],
    )
    assert len(ids) == len(HOSTILE)
    for job_id, value in zip(ids, HOSTILE, strict=True):
        job = store.get_job("q", job_id)
        assert (job.data, job.singleton_key, job.group_id, job.group_tier) == (
            value,
            value,
            value,
            value,
        )


@pytest.mark.parametrize("dlq", ["null", "NULL"])
def test_a_dead_letter_queue_named_null_gets_its_copy(store, dlq):
    store.create_queue(dlq)
    store.create_queue("q", retry_limit=0, dead_letter=dlq)
    job_id = store.send("q", 1)
    (job,) = store.fetch("q")
    assert store.fail("q", [job], {"why": "x"}) == 1
    assert store.get_job("q", job_id).state is JobState.FAILED
    (dead,) = store.fetch(dlq)
    assert dead.source_id == job_id and dead.data == 1
