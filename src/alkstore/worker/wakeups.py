"""In-process wake-ups: a send through a store wakes that store's idle workers of the queue
at once, without a round trip (and on PGlite, whose one shared session cannot LISTEN for
itself, it is the only wake-up there is)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Wakeups:
    """Queue name -> the wake functions of the workers fetching from it. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_queue: dict[str, list[Callable[[], None]]] = {}

    def add(self, queue: str, wake: Callable[[], None]) -> None:
        """Wake ``wake`` whenever ``queue`` gets jobs."""
        with self._lock:
            self._by_queue.setdefault(queue, []).append(wake)

    def remove(self, queue: str, wake: Callable[[], None]) -> None:
        """Stop waking ``wake``."""
        with self._lock:
            found = self._by_queue.get(queue, [])
            if wake in found:
                found.remove(wake)
            if not found:
                self._by_queue.pop(queue, None)

    def queues(self) -> list[str]:
        """The queues some worker waits on."""
        with self._lock:
            return list(self._by_queue)

    def wake(self, queue: str) -> None:
        """Wake every worker of ``queue`` (nothing when none waits: a dict lookup)."""
        with self._lock:
            found = list(self._by_queue.get(queue, ()))
        for wake in found:
            wake()
