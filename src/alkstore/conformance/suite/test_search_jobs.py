"""``search_jobs``: keyset pages of a queue's jobs filtered by state, key and text in data,
each page looking at no more than ``scan`` jobs (the dashboard's filters)."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import InvalidOptions, QueueNotFound


def test_pages_of_a_bounded_window_hold_exactly_the_matches(alkstore_store: Any) -> None:
    store = alkstore_store
    store.create_queue("big")
    ids = store.send_many(
        "big",
        [
            {"data": {"n": n, "tag": "Needle" if n % 9 == 4 else "hay"}}
            | ({"singleton_key": "k"} if n % 2 == 0 else {})
            for n in range(95)
        ],
    )
    for text, key, wanted in (
        ("needle", None, [i for n, i in enumerate(ids) if n % 9 == 4]),
        ("NEEDLE", "k", [i for n, i in enumerate(ids) if n % 9 == 4 and n % 2 == 0]),
        (None, "k", [i for n, i in enumerate(ids) if n % 2 == 0]),
    ):
        found: list[Any] = []
        after = None
        pages = 0
        while True:
            page = store.search_jobs("big", text=text, key=key, after=after, limit=3, scan=20)
            assert len(page.jobs) <= 3
            found += [j.id for j in page.jobs]
            pages += 1
            if page.next_after is None:
                break
            after = page.next_after
        assert found == sorted(wanted), (text, key)
        assert pages >= 95 // 20
    (job,) = store.fetch("big")
    active = store.search_jobs("big", states=["active"], text="n")
    assert [j.id for j in active.jobs] == [job.id] and active.next_after is None


def test_search_checks_its_arguments(alkstore_store: Any) -> None:
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as info:
        alkstore_store.search_jobs("q", text="x", scan=10**6)
    assert info.value.field == "scan"
    with pytest.raises(InvalidOptions) as info:
        alkstore_store.search_jobs("q", states=["nope"])
    assert info.value.field == "states"
    with pytest.raises(InvalidOptions) as info:
        alkstore_store.search_jobs("q", text="")
    assert info.value.field == "text"
    with pytest.raises(QueueNotFound):
        alkstore_store.search_jobs("missing", text="x")
