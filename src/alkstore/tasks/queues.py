"""Which task queues exist, per engine: a task creates its queue the first time a send or a
worker needs it, and not on every send."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.contracts import Engine
    from ..store import AsyncStore, Store


class QueuesMade:
    """Queue names known to exist, per engine (every ``store.using(conn)`` of a store shares
    its engine, so a request's store finds what the app's store made). Thread-safe.

    A queue made inside a caller's transaction that then rolls back is gone: the send that
    finds it missing raises :class:`~alkstore.QueueNotFound` and forgets it, so the next send
    makes it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: weakref.WeakKeyDictionary[Engine, set[str]] = weakref.WeakKeyDictionary()

    def has(self, engine: Engine, queue: str) -> bool:
        """Whether ``queue`` was made (or found) through ``engine``."""
        with self._lock:
            return queue in self._made.get(engine, ())

    def _add(self, engine: Engine, queue: str) -> None:
        with self._lock:
            self._made.setdefault(engine, set()).add(queue)

    def forget(self, engine: Engine, queue: str) -> None:
        """``queue`` turned out missing."""
        with self._lock:
            self._made.get(engine, set()).discard(queue)

    def make(self, store: Store, queue: str, options: Mapping[str, Any]) -> None:
        """Create ``queue`` with ``options`` unless it exists with them (QueueOptionsDiffer
        when it exists with others)."""
        store.create_queue(queue, exist_ok=True, **options)
        self._add(store.engine, queue)

    async def make_async(self, store: AsyncStore, queue: str, options: Mapping[str, Any]) -> None:
        """:meth:`make` on an :class:`~alkstore.AsyncStore`."""
        await store.create_queue(queue, exist_ok=True, **options)
        self._add(store.engine, queue)


__all__ = ["QueuesMade"]
