"""The in-memory engine declares that it keeps no per-queue counters (the postgres family's
counters are checked by the conformance suite, test_counters.py)."""

from __future__ import annotations

import pytest

import alkstore
from alkstore.core.errors import UnsupportedByEngine


def test_the_memory_engine_keeps_no_counters() -> None:
    with alkstore.connect("memory://") as store:
        store.create_queue("q")
        store.maintain()
        with pytest.raises(UnsupportedByEngine, match="counters"):
            store.counters()
