"""What the conformance tests stand on: the backend, a store per test, and test-only tools.

A :class:`StoreHandle` gives every test the same synchronous view of a store, whichever
driver is under test: async stores run on an event loop in a background thread, so one test
body proves both faces. The handle also carries two test-only tools that work on every
engine because they run the engine's own test hooks
(:class:`~alkstore.core.contracts.TestHooks`) on the store's connection: the suite never
writes SQL against an engine's table layout.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import attrs

from ..core.capabilities import Capabilities
from ..core.contracts import TestHooks
from ..core.plans import Plan, Row
from ..drivers import not_installed, registry, variant
from ..drivers.base import DriverSpec
from ..engines import engine_class
from ..engines.pglite.bridge import start_bridge
from ..engines.pglite.engine import data_dir_of
from ..store import AsyncStore, Store, connect, connect_async
from .cluster import TempCluster

T = TypeVar("T")


def driver_variants() -> list[str]:
    """Driver variants the suite can run: every registered driver (psycopg twice, its sync
    and async faces)."""
    return list(registry())


def installed_variants() -> list[str]:
    """The driver variants whose client library is installed: what ``all`` runs."""
    missing = not_installed()
    return [name for name in registry() if name not in missing]


MEMORY_ENGINE = "memory"
"""The in-memory engine: its stores take the two faces of its in-process driver."""

MEMORY_VARIANTS = {
    "memory": DriverSpec(name="memory", is_async=False, extra="", target=""),
    "memory-async": DriverSpec(name="memory", is_async=True, extra="", target=""),
}
"""The driver variants of the in-memory engine (never in the registry: they reach no
server), its sync and async face."""


SEVERAL_SESSIONS = "several_sessions"
"""Pseudo-capability of ``requires``: the engine is not ``single_connection``."""


def skip_reason(engine: str, needs: Sequence[str], capabilities: Capabilities) -> str | None:
    """Why a test needing ``needs`` cannot run on ``engine`` with ``capabilities`` (its
    effective ones on the server under test); None if it can. The reason is the gap's, from
    the engine's description."""
    description = engine_class(engine).description
    if SEVERAL_SESSIONS in needs and capabilities.single_connection:
        return (
            f"{engine} has single_connection: {description.explain('single_connection')}; "
            "the test needs several sessions"
        )
    missing = [c for c in needs if c != SEVERAL_SESSIONS and not getattr(capabilities, c)]
    if not missing:
        return None
    return "; ".join(f"{engine} lacks {c}: {description.explain(c)}" for c in missing)


@attrs.define
class Backend:
    """The database the suite runs against."""

    dsn: str
    engine_name: str
    emulate: bool = False
    stop: Callable[[], None] = lambda: None
    """Stops what :meth:`start` started (a throwaway cluster or a PGlite bridge)."""
    options: dict[str, Any] = attrs.field(factory=dict)
    """More ``connect`` options for every store of the run (``pooler``)."""
    spare_schemas: list[str] = attrs.field(factory=list)
    """Installed schemas that finished tests handed back, reset to their just-installed
    state: the next test takes one instead of installing a schema of its own."""

    @classmethod
    def start(cls, dsn: str | None, engine: str, *, emulate: bool = False) -> Backend:
        """Use ``dsn``; without one start a PGlite bridge (engine ``pglite``, or a
        ``pglite://`` DSN) or a throwaway PostgreSQL cluster. One bridge or cluster serves
        the whole run; each test still gets a schema of its own."""
        if engine == MEMORY_ENGINE:
            return cls(dsn or f"memory://conformance-{uuid.uuid4().hex[:8]}", engine, emulate)
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
    """A store on a schema of its own, seen synchronously, plus test-only tools."""

    def __init__(
        self,
        backend: Backend,
        driver: str,
        schema: str,
        *,
        owner: bool = True,
        engine_options: dict[str, Any] | None = None,
    ) -> None:
        self.owner = owner
        # An in-memory schema costs nothing to create: a test there always gets a new one.
        self.recyclable = owner and backend.engine_name != MEMORY_ENGINE
        """Whether :meth:`close` may hand the schema to the next test instead of dropping
        it: only the handle that created it, only on an engine where installing a schema
        costs something, and only while no test tool changed what a reset does not restore
        (the version record)."""
        self.backend = backend
        self.driver = driver
        self.schema = schema
        spec = MEMORY_VARIANTS.get(driver) or variant(driver)
        self.is_async = spec.is_async
        self._loop: _LoopThread | None = None
        self._store: Store | AsyncStore
        extra: dict[str, Any] = {} if engine_options is None else {"engine_options": engine_options}
        if self.is_async:
            self._loop = _LoopThread()
            try:
                self._store = self._loop.run(
                    _awaited(
                        connect_async(
                            backend.dsn,
                            engine=backend.engine_name,
                            driver=spec.name,
                            schema=schema,
                            emulate=backend.emulate,
                            **backend.options,
                            **extra,
                        )
                    )
                )
            except BaseException:
                self._loop.stop()
                raise
        else:
            self._store = connect(
                backend.dsn,
                engine=backend.engine_name,
                driver=spec.name,
                schema=schema,
                emulate=backend.emulate,
                **backend.options,
                **extra,
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

    @property
    def hooks(self) -> TestHooks:
        """The engine's test hooks."""
        return self.engine.test_hooks()  # type: ignore[no-any-return]

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass for every job of this store."""
        self.run_plan(self.hooks.advance(seconds))

    def job_rows(self) -> list[Row]:
        """Every job, timestamps as ages in seconds (see ``TestHooks.job_rows``)."""
        return self.run_plan(self.hooks.job_rows())  # type: ignore[no-any-return]

    def job_count(self) -> int:
        """How many jobs the schema holds, in every queue and state."""
        return int(self.run_plan(self.hooks.job_count()))

    def reset(self) -> None:
        """Delete every job and queue."""
        self.run_plan(self.hooks.reset())

    def version_records(self) -> int:
        """How many schema-version records exist."""
        return int(self.run_plan(self.hooks.version_records()))

    def set_version(self, version: int) -> None:
        """Record ``version`` as the installed schema version."""
        self.recyclable = False
        self.run_plan(self.hooks.set_version(version))

    def job_storage(self) -> dict[str, int]:
        """Each table or partition holding jobs -> its job count."""
        return self.run_plan(self.hooks.job_storage())  # type: ignore[no-any-return]

    def sibling(self, engine_options: dict[str, Any] | None = None) -> StoreHandle:
        """Another store on the same schema and driver (it does not drop the schema), its
        engine configured with ``engine_options`` if given."""
        return StoreHandle(
            self.backend, self.driver, self.schema, owner=False, engine_options=engine_options
        )

    def close(self) -> None:
        """Close the store. The handle that created the schema resets it and hands it back
        to the backend for the next test (installing a schema costs ten times a reset), or
        drops it when it cannot be reset."""
        try:
            if self.owner:
                self._recycle_or_drop()
        finally:
            if isinstance(self._store, AsyncStore):
                assert self._loop is not None
                self._loop.run(self._store.close())
                self._loop.stop()
            else:
                self._store.close()

    def _recycle_or_drop(self) -> None:
        if self.recyclable:
            try:
                self.reset()
            except Exception:
                # A schema the test left unresettable (a table altered, a session killed)
                # is dropped instead; a failure to drop it then reaches the test.
                self.run_plan(self.hooks.drop())
            else:
                self.backend.spare_schemas.append(self.schema)
            return
        self.run_plan(self.hooks.drop())


def open_handle(backend: Backend, driver: str) -> StoreHandle:
    """A store through ``driver`` on a schema of its own: a spare one a finished test reset,
    else a new one."""
    if backend.spare_schemas:
        return StoreHandle(backend, driver, backend.spare_schemas.pop())
    return StoreHandle(backend, driver, f"t_{uuid.uuid4().hex[:16]}")


def drop_spare_schemas(backend: Backend, driver: str) -> None:
    """Drop the schemas finished tests handed back, through ``driver``: at the end of a run
    the database holds no schema of the suite's."""
    while backend.spare_schemas:
        handle = StoreHandle(backend, driver, backend.spare_schemas.pop())
        handle.recyclable = False
        handle.close()
