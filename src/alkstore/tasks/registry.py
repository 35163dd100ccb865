"""``alkstore.Tasks``: the registry an app declares its tasks in (docs/tasks.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, Unpack, overload

from ..core.errors import InvalidOptions
from ..core.validation import check_queue_name
from ..worker.options import WorkOptions
from .options import TaskOptionsKwargs, split_defaults
from .queues import QueuesMade
from .task import Task, default_queue

if TYPE_CHECKING:
    from ..store import AsyncStore, Store
    from ..worker.options import AppWorkKwargs
    from .drain import Drained
    from .workers import AppWorker, AsyncAppWorker

P = ParamSpec("P")
R = TypeVar("R")


class Tasks:
    """A registry of tasks: declare them with :meth:`task` at import time (no connection is
    needed), send them from anywhere, run them all with :meth:`worker` (or
    ``alkstore worker myapp.tasks:tasks``)."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task[Any, Any]] = {}
        self._made = QueuesMade()

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        fn: None = None,
        /,
        *,
        queue: str | None = None,
        concurrency: int | None = None,
        **defaults: Unpack[TaskOptionsKwargs],
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        queue: str | None = None,
        concurrency: int | None = None,
        **defaults: Any,
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Declare a sync or async function a task: ``@tasks.task`` or
        ``@tasks.task(queue=None, concurrency=None, **defaults)``.

        ``queue`` defaults to the function's ``module.qualname``; ``concurrency`` is how
        many calls of it a worker runs at once (default: the worker's); ``defaults`` are
        options of the queue (created with them, ``exist_ok=True``, when a send or a worker
        first needs it) and of each job it sends. Everything is checked now: a bad option
        raises :class:`~alkstore.InvalidOptions` naming it."""
        queue_options, send_options = split_defaults(defaults)
        if concurrency is not None:
            WorkOptions(concurrency=concurrency)
        if queue is not None:
            check_queue_name(queue)

        def declare(function: Callable[P, R]) -> Task[P, R]:
            if not callable(function):
                raise InvalidOptions("fn", function, "a task is a function")
            name = queue if queue is not None else default_queue(function)
            if name in self._tasks:
                raise InvalidOptions(
                    "queue", name, f"already the queue of {self._tasks[name].fn.__qualname__}"
                )
            made = Task(function, name, queue_options, send_options, concurrency, self._made)
            self._tasks[name] = made
            return made

        return declare if fn is None else declare(fn)

    def __iter__(self) -> Iterator[Task[Any, Any]]:
        """The tasks, in the order they were declared."""
        return iter(list(self._tasks.values()))

    def __len__(self) -> int:
        """How many tasks."""
        return len(self._tasks)

    def __getitem__(self, queue: str) -> Task[Any, Any]:
        """The task whose queue is ``queue``."""
        return self._tasks[queue]

    def selected(self, queues: Iterable[str] | None) -> list[Task[Any, Any]]:
        """The tasks of ``queues`` (every task for None); an unknown name, or none at all,
        is refused (a worker or a drain of nothing is a mistake)."""
        if queues is None:
            if not self._tasks:
                raise InvalidOptions("tasks", 0, "the registry has no task: declare some first")
            return list(self._tasks.values())
        wanted = list(queues)
        unknown = [q for q in wanted if q not in self._tasks]
        if unknown:
            raise InvalidOptions("queues", unknown, f"no task; known: {sorted(self._tasks)}")
        if not wanted:
            raise InvalidOptions("queues", wanted, "names no queue")
        return [self._tasks[q] for q in wanted]

    def ensure_queues(self, store: Store) -> None:
        """Create every task's queue now (``exist_ok=True``), e.g. at an app's start, so that
        no send in a request's transaction has to."""
        for task in self._tasks.values():
            self._made.make(store, task.queue, task.queue_options)

    async def ensure_queues_async(self, store: AsyncStore) -> None:
        """:meth:`ensure_queues` on an :class:`~alkstore.AsyncStore`."""
        for task in self._tasks.values():
            await self._made.make_async(store, task.queue, task.queue_options)

    def worker(
        self,
        store: Store,
        *,
        queues: Iterable[str] | None = None,
        concurrency: int = 1,
        **options: Unpack[AppWorkKwargs],
    ) -> AppWorker:
        """Start one worker per task queue (all of them, or ``queues``) on ``store``, in this
        process: sync tasks in threads, async ones on an event loop of the worker's own.
        Each runs ``concurrency`` calls at once unless its task declares its own; the other
        options are ``store.work``'s. Returns the :class:`~alkstore.tasks.AppWorker` (stop it
        with ``stop()`` or a ``with`` block)."""
        from .workers import AppWorker

        chosen = self.selected(queues)
        for task in chosen:
            self._made.make(store, task.queue, task.queue_options)
        return AppWorker(store, chosen, concurrency, options)

    async def worker_async(
        self,
        store: AsyncStore,
        *,
        queues: Iterable[str] | None = None,
        concurrency: int = 1,
        **options: Unpack[AppWorkKwargs],
    ) -> AsyncAppWorker:
        """:meth:`worker` on an :class:`~alkstore.AsyncStore`: async tasks run on the running
        loop, sync ones in threads (``asyncio.to_thread``)."""
        from .workers import AsyncAppWorker

        chosen = self.selected(queues)
        for task in chosen:
            await self._made.make_async(store, task.queue, task.queue_options)
        return await AsyncAppWorker.start(store, chosen, concurrency, options)

    def drain(self, store: Store, *, queues: Iterable[str] | None = None) -> Drained:
        """Run every due job of the tasks' queues (or of ``queues``) here and now, one after
        another, including the jobs they send and the retries that fall due meanwhile, until
        none is due; the counts. For tests (docs/testing.md)."""
        from .drain import drain

        chosen = self.selected(queues)
        for task in chosen:
            self._made.make(store, task.queue, task.queue_options)
        return drain(store, chosen)

    async def drain_async(
        self, store: AsyncStore, *, queues: Iterable[str] | None = None
    ) -> Drained:
        """:meth:`drain` on an :class:`~alkstore.AsyncStore`."""
        from .drain import drain_async

        chosen = self.selected(queues)
        for task in chosen:
            await self._made.make_async(store, task.queue, task.queue_options)
        return await drain_async(store, chosen)


__all__ = ["Tasks"]
