"""What the worker runtime asks of a store: the narrow, typed interface through which
``alkstore.worker`` reaches :class:`~alkstore.Store` and :class:`~alkstore.AsyncStore`
(which import the worker package, never the other way round)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..core.contracts import Engine
from ..core.plans import Plan
from ..core.records import Handoff, MaintenanceReport, Queue, QueueStats
from ..drivers.base import AsyncDriver, AsyncSource, DriverSettings, SyncDriver, SyncSource
from ..operations import Operations

if TYPE_CHECKING:
    from .runtime import AsyncStoreRuntime, StoreRuntime

T = TypeVar("T")


class _Face(Protocol):
    engine: Engine
    _ops: Operations

    @property
    def _listen_at(self) -> tuple[str, DriverSettings] | None:
        """Where the runtime LISTENs (None: nowhere of its own)."""
        ...


class SyncFace(_Face, Protocol):
    """A :class:`~alkstore.Store` as its workers and supervisor use it."""

    driver: SyncDriver
    _source: SyncSource

    @property
    def _runtime(self) -> StoreRuntime:
        """The store's runtime (workers, wake-ups, supervisor)."""
        ...

    def _run(self, plan: Plan[T]) -> T:
        """Run ``plan`` on the store's connections."""
        ...

    def get_queue(self, name: str) -> Queue | None:
        """See :meth:`alkstore.Store.get_queue`."""
        ...

    def fail(self, queue: str, ids: Any, error: Any = ...) -> int:
        """See :meth:`alkstore.Store.fail`."""
        ...

    def complete_and_fetch(
        self,
        queue: str,
        ids: Any,
        output: Any = ...,
        *,
        batch_size: int = ...,
        group_concurrency: Any = ...,
    ) -> Handoff:
        """See :meth:`alkstore.Store.complete_and_fetch`."""
        ...

    def maintain(self, *, count_every: float = ...) -> MaintenanceReport:
        """See :meth:`alkstore.Store.maintain`."""
        ...

    def fire_schedules(self) -> int:
        """See :meth:`alkstore.Store.fire_schedules`."""
        ...

    def queue_stats(self, name: str) -> QueueStats:
        """See :meth:`alkstore.Store.queue_stats`."""
        ...


class AsyncFace(_Face, Protocol):
    """An :class:`~alkstore.AsyncStore` as its workers and supervisor use it."""

    driver: AsyncDriver
    _source: AsyncSource

    @property
    def _runtime(self) -> AsyncStoreRuntime:
        """The store's runtime (workers, wake-ups, supervisor)."""
        ...

    async def _run(self, plan: Plan[T]) -> T:
        """Run ``plan`` on the store's connections."""
        ...

    async def get_queue(self, name: str) -> Queue | None:
        """See :meth:`alkstore.AsyncStore.get_queue`."""
        ...

    async def fail(self, queue: str, ids: Any, error: Any = ...) -> int:
        """See :meth:`alkstore.AsyncStore.fail`."""
        ...

    async def complete_and_fetch(
        self,
        queue: str,
        ids: Any,
        output: Any = ...,
        *,
        batch_size: int = ...,
        group_concurrency: Any = ...,
    ) -> Handoff:
        """See :meth:`alkstore.AsyncStore.complete_and_fetch`."""
        ...

    async def maintain(self, *, count_every: float = ...) -> MaintenanceReport:
        """See :meth:`alkstore.AsyncStore.maintain`."""
        ...

    async def fire_schedules(self) -> int:
        """See :meth:`alkstore.AsyncStore.fire_schedules`."""
        ...

    async def queue_stats(self, name: str) -> QueueStats:
        """See :meth:`alkstore.AsyncStore.queue_stats`."""
        ...


__all__ = ["AsyncFace", "SyncFace"]
