"""Fixtures of the micro-benchmarks: one durable server, one store per driver.

The server is ``$ALKSTORE_BENCH_DSN`` when set, else a throwaway durable PostgreSQL (see
:func:`alkstore.bench.server.bench_server`). Async drivers run each operation to completion
on one event loop kept for the whole module, so the figures are per operation.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from alkstore.bench.drain import DRIVERS, Backend
from alkstore.bench.server import bench_server, drop_schema

T = TypeVar("T")
SCHEMA = "alkstore_micro"
QUEUE = "micro"


@pytest.fixture(scope="session")
def bench_dsn() -> Iterator[str]:
    """The server's DSN."""
    with bench_server(os.environ.get("ALKSTORE_BENCH_DSN")) as server:
        if not server.durability.durable:
            print(f"\nwarning: the server is {server.durability.label}")
        yield server.dsn


class Ops:
    """The store's operations as plain calls, whatever the driver."""

    def __init__(self, store: Any, loop: asyncio.AbstractEventLoop | None) -> None:
        self.store = store
        self.loop = loop

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``store.<name>(*args, **kwargs)``, run to completion."""
        result = getattr(self.store, name)(*args, **kwargs)
        if self.loop is not None:
            return self.loop.run_until_complete(result)
        return result


@pytest.fixture(params=DRIVERS)
def ops(request: pytest.FixtureRequest, bench_dsn: str) -> Iterator[Ops]:
    """A store with queue ``micro`` on the parametrised driver."""
    backend = Backend("postgres", request.param)
    if backend.is_async:
        loop = asyncio.new_event_loop()
        store = loop.run_until_complete(backend.open_async(bench_dsn, SCHEMA, pool_size=2))
        ops = Ops(store, loop)
    else:
        loop = None
        ops = Ops(backend.open_sync(bench_dsn, SCHEMA, pool_size=2), None)
    ops.call("create_queue", QUEUE)
    try:
        yield ops
    finally:
        ops.call("close")
        if loop is not None:
            loop.close()
        drop_schema(bench_dsn, SCHEMA)


def run(loop: asyncio.AbstractEventLoop | None, value: Awaitable[T] | T) -> T:
    """Await ``value`` on ``loop`` when there is one."""
    if loop is None:
        return value  # type: ignore[return-value]
    return loop.run_until_complete(value)  # type: ignore[arg-type]


Setup = Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]
