"""Every text value reaches the server exactly: no string is ever taken for SQL NULL.

Drivers bind lists as arrays; where an array travels as a text literal (``{a,b}``), an element
``null`` (any case) unquoted means NULL, and quotes, commas, braces and backslashes change
the elements. These strings go through every text option of ``send`` and ``send_many`` and
must come back from ``get_job`` as sent.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from alkstore import JobState
from alkstore.core.validation import QUEUE_NAME

from .conftest import examples

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
def test_hostile_strings_are_stored_exactly_by_send(alkstore_store, value):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send(
        "q", {"v": value}, singleton_key=value, group_id=value, group_tier=value
    )
    job = alkstore_store.get_job("q", job_id)
    assert (job.singleton_key, job.group_id, job.group_tier) == (value, value, value)
    assert job.data == {"v": value}


def test_hostile_strings_are_stored_exactly_by_send_many(alkstore_store):
    alkstore_store.create_queue("q")
    ids = alkstore_store.send_many(
        "q",
        [{"data": v, "singleton_key": v, "group_id": v, "group_tier": v} for v in HOSTILE],
    )
    assert len(ids) == len(HOSTILE)
    for job_id, value in zip(ids, HOSTILE, strict=True):
        job = alkstore_store.get_job("q", job_id)
        assert (job.data, job.singleton_key, job.group_id, job.group_tier) == (
            value,
            value,
            value,
            value,
        )


@pytest.mark.parametrize("dlq", ["null", "NULL"])
def test_a_dead_letter_queue_named_null_gets_its_copy(alkstore_store, dlq):
    alkstore_store.create_queue(dlq)
    alkstore_store.create_queue("q", retry_limit=0, dead_letter=dlq)
    job_id = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    assert alkstore_store.fail("q", [job], {"why": "x"}) == 1
    assert alkstore_store.get_job("q", job_id).state is JobState.FAILED
    (dead,) = alkstore_store.fetch(dlq, include_metadata=True)
    assert dead.source_id == job_id and dead.data == 1


# -- property: any storable text, through every text option ---------------------------------

HOSTILE_PARTS = [
    *HOSTILE,
    ",",
    "{",
    "}",
    "\\\\",
    '\\"',
    "NuLl",
    "\t",
    "\n",
    "\r\n",
    "\u00a0",
    "\u2028",
    "\ufeff",
    "e\u0301",
    "😀",
    "\U00010348",
    "\U0010ffff",
]
"""Pieces that change an array or record literal, or that encoders get wrong: NULL
spellings, quotes, separators, braces, backslashes, whitespace (including Unicode's and a BOM),
combining marks and astral characters."""

STORABLE = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
"""Any character PostgreSQL's text stores: validation refuses NUL and lone surrogates."""

TEXT = st.one_of(
    st.sampled_from(HOSTILE_PARTS),
    st.lists(
        st.one_of(st.sampled_from(HOSTILE_PARTS), st.text(STORABLE, min_size=1, max_size=4)),
        min_size=1,
        max_size=5,
    ).map("".join),
)
"""A non-empty string of at most 200 characters (the key options' limit) a driver might
mistake for NULL or split."""

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
"""JSON data with hostile strings as values and as keys."""

QUEUE = st.one_of(
    st.sampled_from(["null", "NULL", "Null", "N", "a.b", "a/b", "a-b", "a_b", "0"]),
    st.from_regex(QUEUE_NAME, fullmatch=True),
)
"""A valid queue name, NULL spellings first (queue names are 1-100 of ``[A-Za-z0-9_\\-./]``)."""


def canonical(value: object) -> str:
    """``value`` as JSON with sorted keys: jsonb keeps no key order."""
    return json.dumps(value, sort_keys=True)


PROPERTY = settings(
    max_examples=int(os.environ.get("ALKSTORE_EXACT_EXAMPLES", examples(12))),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
"""Modest: each example is a few round trips, and the suite runs per engine and driver."""


@PROPERTY
@given(
    queue=QUEUE,
    dlq=QUEUE,
    jobs=st.lists(st.tuples(JSON, TEXT, TEXT, TEXT), min_size=1, max_size=3),
    output=st.dictionaries(TEXT, TEXT, max_size=2),
)
def test_any_storable_text_round_trips_through_every_text_option(
    alkstore_store, queue, dlq, jobs, output
):
    assume(queue != dlq)
    store = alkstore_store
    store.reset()
    store.create_queue(dlq)
    store.create_queue(queue, retry_limit=0, dead_letter=dlq)
    assert store.get_queue(queue).dead_letter == dlq

    data, key, group, tier = jobs[0]
    one = store.send(queue, data, singleton_key=key, group_id=group, group_tier=tier)
    many = store.send_many(
        queue,
        [{"data": d, "singleton_key": k, "group_id": g, "group_tier": t} for d, k, g, t in jobs],
    )
    sent = dict(zip([one, *many], [jobs[0], *jobs], strict=True))
    assert None not in sent
    for job_id, (d, k, g, t) in sent.items():
        job = store.get_job(queue, job_id)
        assert (job.queue, job.data, job.singleton_key, job.group_id, job.group_tier) == (
            queue,
            d,
            k,
            g,
            t,
        )

    # Fetched, failed for good and copied to the dead-letter queue: each copy keeps its data,
    # key, output and source queue; redrive moves the copies back to the queue by its name.
    fetched = store.fetch(queue, batch_size=len(sent))
    assert {j.id: j.data for j in fetched} == {i: s[0] for i, s in sent.items()}
    assert store.fail(queue, fetched, output) == len(sent)
    dead = store.list_jobs(dlq)
    assert sorted((j.source_id, j.source_queue) for j in dead) == sorted((i, queue) for i in sent)
    for copy in dead:
        d, k, _g, _t = sent[copy.source_id]
        assert (copy.data, copy.singleton_key, copy.output) == (d, k, output)
    assert store.redrive(dlq, to=queue) == len(sent)
    back = store.list_jobs(queue, states=[JobState.CREATED])
    assert sorted(canonical(j.data) for j in back) == sorted(canonical(s[0]) for s in sent.values())
