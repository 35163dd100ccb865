"""Workers for the suite's tests, seen synchronously whatever the store's face.

A test writes its handler once, as a plain function ``handler(job, ctx)``. On an async store
the handler runs in a thread (``asyncio.to_thread``) with a :class:`ThreadContext` that
mirrors the task's :class:`~alkstore.worker.AsyncJobContext`, so one test body proves both
shells.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from alkstore.conformance.harness import StoreHandle
from alkstore.core.plans import Statement, single


class _Mirror:
    """``is_set`` / ``wait`` of an asyncio.Event, read from a handler's thread."""

    def __init__(self, event: asyncio.Event) -> None:
        self._event = event

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._event.is_set():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True


class ThreadContext:
    """An async context as a handler thread sees it."""

    def __init__(self, ctx: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._ctx = ctx
        self._loop = loop
        self.cancelled = _Mirror(ctx.cancelled)
        self.job = ctx.job
        self.jobs = ctx.jobs

    def heartbeat(self) -> bool:
        return bool(asyncio.run_coroutine_threadsafe(self._ctx.heartbeat(), self._loop).result())

    def execute(self, sql: str, *params: Any) -> None:
        """Run ``sql`` on the transactional connection (asyncpg or psycopg async)."""
        conn = self._ctx.connection
        if type(conn).__module__.startswith("asyncpg"):
            coro = conn.execute(sql, *params)
        else:
            coro = conn.execute(sql.replace("$1", "%s"), params)
        asyncio.run_coroutine_threadsafe(coro, self._loop).result()


def execute(ctx: Any, sql: str, *params: Any) -> None:
    """Run ``sql`` (one ``$1`` parameter at most) on a transactional handler's connection."""
    if isinstance(ctx, ThreadContext):
        ctx.execute(sql, *params)
        return
    conn = ctx.connection
    if type(conn).__module__.startswith("pg8000"):
        conn.run(sql.replace("$1", ":p1"), **{f"p{i + 1}": p for i, p in enumerate(params)})
    else:
        conn.execute(sql.replace("$1", "%s"), params)


class WorkerView:
    """A worker of either face, with a synchronous ``stop``."""

    def __init__(self, store: StoreHandle, worker: Any) -> None:
        self._store = store
        self.worker = worker

    def stop(self, timeout: float = 30.0) -> None:
        if self._store.is_async:
            assert self._store._loop is not None
            self._store._loop.run(self.worker.stop(timeout))
        else:
            self.worker.stop(timeout)

    def __enter__(self) -> WorkerView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def work(store: StoreHandle, queue: str, handler: Callable[..., Any], **options: Any) -> WorkerView:
    """Start a worker running ``handler(job_or_jobs, ctx)`` on ``queue``."""
    if not store.is_async:
        return WorkerView(store, store.work(queue, handler, **options))
    assert store._loop is not None
    loop = store._loop.loop

    async def on_thread(arg: Any, ctx: Any) -> Any:
        return await asyncio.to_thread(handler, arg, ThreadContext(ctx, loop))

    return WorkerView(store, store.work(queue, on_thread, **options))


def side_table(store: StoreHandle) -> tuple[str, Callable[[], list[str]]]:
    """A table of the application's for transactional handlers to write to (in the default
    schema, named uniquely), and a function that reads the ids it holds."""
    name = f"side_{uuid.uuid4().hex[:12]}"
    store.run_plan(
        single("test-side", Statement(f"CREATE TABLE {name} (id uuid PRIMARY KEY)"), list)
    )

    def ids() -> list[str]:
        rows = store.run_plan(single("test-side", Statement(f"SELECT id FROM {name}"), list))
        return [str(row["id"]) for row in rows]

    return name, ids
