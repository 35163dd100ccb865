"""A task: a function whose calls are sent as jobs to its own queue (docs/tasks.md)."""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, Unpack

from ..core.errors import InvalidOptions, QueueNotFound
from ..core.kwargs import JobOptionsKwargs
from ..core.options import JobOptions, dump_json
from ..core.validation import check_queue_name
from ..store import AsyncStore, Store
from .queues import QueuesMade

P = ParamSpec("P")
R = TypeVar("R")

_PARAMETER = re.compile(r"'([^']+)'")


def default_queue(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of ``fn`` as a queue name (without ``<locals>``, and without the
    underscores around a module name such as ``__main__``); InvalidOptions when that is
    still no valid queue name."""
    name = f"{fn.__module__.strip('_')}.{fn.__qualname__}".replace(".<locals>", "")
    try:
        return check_queue_name(name)
    except InvalidOptions:
        raise InvalidOptions(
            "queue", name, f"is no valid queue name (derived from {fn.__qualname__}): pass queue="
        ) from None


class Task(Generic[P, R]):
    """What ``@tasks.task`` makes of a function: still callable as the function, and
    :meth:`send` / :meth:`send_async` put a call of it in its queue, typed with the
    function's own parameters."""

    def __init__(
        self,
        fn: Callable[P, R],
        queue: str,
        queue_options: Mapping[str, Any],
        send_options: Mapping[str, Any],
        concurrency: int | None,
        made: QueuesMade,
    ) -> None:
        self.fn = fn
        """The plain function."""
        self.queue = queue
        """The queue its jobs go to (one task per queue)."""
        self.queue_options: Mapping[str, Any] = dict(queue_options)
        """The queue's options (it is created with them, ``exist_ok=True``)."""
        self.send_options: Mapping[str, Any] = dict(send_options)
        """The options of each job it sends (see :meth:`with_options`)."""
        self.concurrency = concurrency
        """Calls a worker runs at once for this task (None: the worker's ``concurrency``)."""
        self.is_async = inspect.iscoroutinefunction(fn)
        """Whether the function is ``async def``."""
        self._signature = inspect.signature(fn)
        self._made = made

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the plain function, here and now."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Task {self.fn.__qualname__} on {self.queue!r}>"

    def with_options(self, **options: Unpack[JobOptionsKwargs]) -> Task[P, R]:
        """The same task, its sends with these job options over its own (``priority``,
        ``start_after``, ``singleton_key``, a caller-chosen ``id`` …), checked now."""
        merged = {**self.send_options, **options}
        JobOptions(**merged)
        return Task(self.fn, self.queue, self.queue_options, merged, self.concurrency, self._made)

    # -- sending ---------------------------------------------------------------------------

    def job_data(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The job data of a call: its arguments by parameter name, as JSON values.
        A wrong, missing or non-JSON argument raises :class:`~alkstore.InvalidOptions`
        naming the parameter."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            found = _PARAMETER.search(str(exc))
            if found is None:
                raise InvalidOptions("args", args, str(exc)) from None
            name = found.group(1)
            raise InvalidOptions(name, kwargs.get(name), str(exc)) from None
        return bound.arguments

    def send(self, store: Store, /, *args: P.args, **kwargs: P.kwargs) -> uuid.UUID | None:
        """Send a call of the task as a job; its id (None when the queue's policy or the
        job's throttle refused it). The first send through a store's engine creates the
        queue (``exist_ok=True``). Works on ``store.using(conn)``: the job commits with your
        transaction."""
        _face(store, Store, "await task.send_async(store, ...) on an AsyncStore")
        data = self.job_data(*args, **kwargs)
        if not self._made.has(store.engine, self.queue):
            _json_checked(data)  # before the queue is made
            self._made.make(store, self.queue, self.queue_options)
        try:
            return store.send(self.queue, data, **self.send_options)
        except QueueNotFound:
            self._made.forget(store.engine, self.queue)
            raise
        except InvalidOptions as exc:
            raise self._named(exc, data) from None

    async def send_async(
        self, store: AsyncStore, /, *args: P.args, **kwargs: P.kwargs
    ) -> uuid.UUID | None:
        """:meth:`send` on an :class:`~alkstore.AsyncStore`."""
        _face(store, AsyncStore, "task.send(store, ...) on a Store")
        data = self.job_data(*args, **kwargs)
        if not self._made.has(store.engine, self.queue):
            _json_checked(data)  # before the queue is made
            await self._made.make_async(store, self.queue, self.queue_options)
        try:
            return await store.send(self.queue, data, **self.send_options)
        except QueueNotFound:
            self._made.forget(store.engine, self.queue)
            raise
        except InvalidOptions as exc:
            raise self._named(exc, data) from None

    def _named(self, exc: InvalidOptions, data: dict[str, Any]) -> InvalidOptions:
        """A refused payload, told by the parameter that made it so."""
        if exc.field != "data":
            return exc
        try:
            _json_checked(data)
        except InvalidOptions as named:
            return named
        return exc

    # -- running ---------------------------------------------------------------------------

    def call_with(self, data: Any) -> R:
        """Call the function with a job's data (its arguments by parameter name)."""
        if not isinstance(data, Mapping):
            raise TypeError(f"task {self.fn.__qualname__}: job data {data!r} is not a mapping")
        unknown = sorted(set(data) - set(self._signature.parameters))
        if unknown:
            raise TypeError(f"task {self.fn.__qualname__} has no parameter {unknown}")
        bound = inspect.BoundArguments(self._signature, dict(data))
        return self.fn(*bound.args, **bound.kwargs)


def _json_checked(data: dict[str, Any]) -> None:
    """Raise :class:`~alkstore.InvalidOptions` naming the first argument that is not JSON."""
    for name, value in data.items():
        dump_json(name, value)


def _face(store: object, face: type, instead: str) -> None:
    """Refuse a store of the other face (its calls would return coroutines never awaited,
    or block the event loop)."""
    if not isinstance(store, face):
        raise InvalidOptions("store", type(store).__name__, f"is no {face.__name__}: {instead}")


__all__ = ["Task", "default_queue"]
