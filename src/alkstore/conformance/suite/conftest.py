"""Shared helpers of the suite's test modules."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import settings

from alkstore.conformance.harness import skip_reason

T = TypeVar("T")


def eventually(check: Callable[[], T], *, timeout: float = 10.0, interval: float = 0.02) -> T:
    """Poll ``check`` until it returns something truthy, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value {value!r})")
        time.sleep(interval)


def examples(full: int) -> int:
    """How many examples a property test of the suite runs: ``full``, or fewer where the
    loaded hypothesis profile allows fewer (``alkstore-matrix``, docs/conformance.md)."""
    return min(full, settings().max_examples)


def make_queue(store: Any, name: str, partition: bool, **options: Any) -> None:
    """Create ``name`` (a partition of its own only where the engine has them: elsewhere the
    case is skipped, naming the engine's gap, and its shared-table twin covers the engine)."""
    if partition:
        why = skip_reason(
            store.engine.name, ("table_partitioning", "plpgsql"), store.engine.capabilities
        )
        if why is not None:
            pytest.skip(f"{why}; the shared-table twin of this case runs")
    store.create_queue(name, partition=partition, **options)
