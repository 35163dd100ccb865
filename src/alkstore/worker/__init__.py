"""The worker runtime: ``store.work()`` runs a handler on a queue's jobs in the background.

See ``docs/workers.md``. :class:`Worker` (threads, for :class:`~alkstore.Store`) and
:class:`AsyncWorker` (tasks, for :class:`~alkstore.AsyncStore`) share everything but how they
wait: the settlement of a handler's result (:mod:`.settle`), the options, the events.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidOptions, QueueNotFound
from ..core.records import Queue
from ..core.validation import check_queue_name
from .context import AsyncJobContext, JobContext
from .events import WorkerEvent
from .options import WorkOptions
from .settle import wants_context
from .tasks import AsyncWorker
from .threads import Worker

if TYPE_CHECKING:
    from ..core.contracts import Engine
    from .faces import AsyncFace, SyncFace


def prepare(
    queue: str, handler: Callable[..., Any], options: Mapping[str, Any]
) -> tuple[str, WorkOptions]:
    """Check ``work()``'s arguments before any I/O."""
    name = check_queue_name(queue)
    wants_context(handler)
    return name, WorkOptions.from_kwargs(dict(options))


def check_queue(engine: Engine, name: str, found: Queue | None, opts: WorkOptions) -> None:
    """Refuse what the queue and the engine cannot do together."""
    if found is None:
        raise QueueNotFound(name)
    caps = engine.capabilities
    if opts.transactional and not getattr(engine, "caller_transactions", True):
        raise InvalidOptions(
            "transactional",
            True,
            f"engine {engine.name!r} has no database transaction to run a handler in",
        )
    if opts.transactional and found.options.heartbeat_seconds and not caps.transactional_heartbeat:
        raise InvalidOptions(
            "transactional",
            True,
            f"queue {name!r} sets heartbeat_seconds and engine {engine.name!r} lacks "
            "transactional_heartbeat (a heartbeat from another session would abort the "
            "handler's transaction)",
        )


def start(
    store: SyncFace, queue: str, handler: Callable[..., Any], options: Mapping[str, Any]
) -> Worker:
    """``Store.work()``: an ``async def`` handler is refused (its coroutine would never run)."""
    if inspect.iscoroutinefunction(handler):
        raise InvalidOptions(
            "handler",
            handler,
            "is async: run it on an AsyncStore (await store.work(...)) or as a task "
            "(docs/tasks.md)",
        )
    name, opts = prepare(queue, handler, options)
    check_queue(store.engine, name, store.get_queue(name), opts)
    return Worker(store, name, handler, opts)


async def start_async(
    store: AsyncFace, queue: str, handler: Callable[..., Any], options: Mapping[str, Any]
) -> AsyncWorker:
    """``AsyncStore.work()``."""
    name, opts = prepare(queue, handler, options)
    check_queue(store.engine, name, await store.get_queue(name), opts)
    return AsyncWorker(store, name, handler, opts)


__all__ = [
    "AsyncJobContext",
    "AsyncWorker",
    "JobContext",
    "WorkOptions",
    "Worker",
    "WorkerEvent",
    "start",
    "start_async",
]
