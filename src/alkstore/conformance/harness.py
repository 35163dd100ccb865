"""What the conformance tests stand on: the backend, a store per test, and test-only tools.

A :class:`StoreHandle` gives every test the same synchronous view of a store, whichever
driver is under test: async stores run on an event loop in a background thread, so one test
body proves both faces. The handle also carries two test-only tools that work on every
engine because they go through the store's own connection: :meth:`StoreHandle.sql` and
:meth:`StoreHandle.advance` (a controllable clock: shifting every stored timestamp back by
``s`` seconds is the same, for the store, as ``s`` seconds passing).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import attrs

from ..core.plans import Plan, Row, Statement, single
from ..drivers import registry, variant
from ..engines import engine_class
from ..engines.pglite.bridge import start_bridge
from ..engines.pglite.engine import data_dir_of
from ..engines.postgres.identifiers import quote_schema
from ..store import AsyncStore, Store, connect, connect_async
from .cluster import TempCluster
from .deviations import explain

T = TypeVar("T")


def driver_variants() -> list[str]:
    """Driver variants the suite can run: every registered driver (psycopg twice, its sync
    and async faces)."""
    return list(registry())


TIMESTAMP_COLUMNS = (
    "created_on",
    "start_after",
    "started_on",
    "completed_on",
    "heartbeat_on",
    "keep_until",
)


SEVERAL_SESSIONS = "several_sessions"
"""Pseudo-capability of ``requires``: the engine is not ``single_connection``."""


def skip_reason(engine: str, capabilities: Sequence[str]) -> str | None:
    """Why a test needing ``capabilities`` cannot run on ``engine`` (None if it can)."""
    caps = engine_class(engine).capabilities
    if SEVERAL_SESSIONS in capabilities and caps.single_connection:
        return (
            f"{engine} has single_connection: {explain(engine, 'single_connection')}; "
            "the test needs several sessions"
        )
    missing = [c for c in capabilities if c != SEVERAL_SESSIONS and not getattr(caps, c)]
    if not missing:
        return None
    return "; ".join(f"{engine} lacks {c}: {explain(engine, c)}" for c in missing)


@attrs.define
class Backend:
    """The database the suite runs against."""

    dsn: str
    engine_name: str
    emulate: bool = False
    stop: Callable[[], None] = lambda: None
    """Stops what :meth:`start` started (a throwaway cluster or a PGlite bridge)."""

    @classmethod
    def start(cls, dsn: str | None, engine: str, *, emulate: bool = False) -> Backend:
        """Use ``dsn``; without one start a PGlite bridge (engine ``pglite``, or a
        ``pglite://`` DSN) or a throwaway PostgreSQL cluster. One bridge or cluster serves
        the whole run; each test still gets a schema of its own."""
        if engine == "pglite" and (not dsn or dsn.startswith("pglite:")):
            bridge = start_bridge(data_dir_of(dsn or "pglite://"))

            def stop() -> None:
                bridge.close()

            return cls(bridge.dsn, engine, emulate, stop)
        if dsn:
            return cls(dsn, engine, emulate)
        cluster = TempCluster()
        return cls(cluster.start(), engine, emulate, cluster.stop)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


class _LoopThread:
    """An event loop running in a daemon thread, for the sync view of async stores."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class StoreHandle:
    """A store on a fresh schema, seen synchronously, plus test-only tools."""

    def __init__(self, backend: Backend, driver: str, schema: str, *, owner: bool = True) -> None:
        self.owner = owner
        self.backend = backend
        self.driver = driver
        self.schema = schema
        spec = variant(driver)
        self.is_async = spec.is_async
        self._loop: _LoopThread | None = None
        self._store: Store | AsyncStore
        if self.is_async:
            self._loop = _LoopThread()
            self._store = self._loop.run(
                _awaited(
                    connect_async(
                        backend.dsn,
                        engine=backend.engine_name,
                        driver=spec.name,
                        schema=schema,
                        emulate=backend.emulate,
                    )
                )
            )
        else:
            self._store = connect(
                backend.dsn,
                engine=backend.engine_name,
                driver=spec.name,
                schema=schema,
                emulate=backend.emulate,
            )

    @property
    def engine(self) -> Any:
        """The engine instance of the store under test."""
        return self._store.engine

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._store, name)
        if not self.is_async:
            return method  # type: ignore[no-any-return]
        loop = self._loop
        assert loop is not None

        def call(*args: Any, **kwargs: Any) -> Any:
            return loop.run(method(*args, **kwargs))

        return call

    def run_plan(self, plan: Plan[Any]) -> Any:
        """Run any plan on the store's own connection."""
        if isinstance(self._store, AsyncStore):
            assert self._loop is not None
            return self._loop.run(self._store._run(plan))
        return self._store._run(plan)

    def sql(self, sql: str, *params: Any) -> list[Row]:
        """Run one statement (``{s}`` is replaced by the quoted schema); returns its rows."""
        text = sql.replace("{s}", quote_schema(self.schema))
        return self.run_plan(single("test-sql", Statement(text, params), lambda rows: rows))  # type: ignore[no-any-return]

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass for every job and queue of this store."""
        shift = ", ".join(
            f"{c} = {c} - $1::float8 * interval '1 second'" for c in TIMESTAMP_COLUMNS
        )
        self.sql(f"UPDATE {{s}}.job SET {shift}", float(seconds))

    def job_count(self) -> int:
        """How many jobs the schema holds, in every queue and state."""
        return int(self.sql("SELECT count(*) AS n FROM {s}.job")[0]["n"])

    def sibling(self) -> StoreHandle:
        """Another store on the same schema and driver (it does not drop the schema)."""
        return StoreHandle(self.backend, self.driver, self.schema, owner=False)

    def close(self) -> None:
        """Close the store; the handle that created the schema drops it first."""
        try:
            if self.owner:
                self.sql(f"DROP SCHEMA {quote_schema(self.schema)} CASCADE")
        finally:
            if isinstance(self._store, AsyncStore):
                assert self._loop is not None
                self._loop.run(self._store.close())
                self._loop.stop()
            else:
                self._store.close()


def open_handle(backend: Backend, driver: str) -> StoreHandle:
    """A store through ``driver`` on a schema of its own."""
    return StoreHandle(backend, driver, f"t_{uuid.uuid4().hex[:16]}")
