"""How measurements report progress without the timed loops ever touching a progress bar.

A measurement hands a ``read()`` of its own counter to :meth:`Progress.track`; a background
thread copies it every 0.1 s (:func:`polling`) into a rich progress bar
(:class:`~alkstore.bench.report.BenchProgress`) or, in a cell's child process, into a counter
shared with the parent (:class:`~alkstore.bench.isolation.SharedCounterProgress`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

POLL_INTERVAL = 0.1
"""Seconds between two copies of a counter."""


class Progress(Protocol):
    """What a measurement reports its progress to."""

    def track(
        self, description: str, total: int, read: Callable[[], int]
    ) -> contextlib.AbstractContextManager[None]:
        """Report ``read()`` against ``total`` while the block runs."""
        ...


@contextlib.contextmanager
def polling(read: Callable[[], int], write: Callable[[int], None]) -> Iterator[None]:
    """``write(read())`` every :data:`POLL_INTERVAL` while the block runs, and once after."""
    done = threading.Event()

    def poll() -> None:
        while not done.wait(POLL_INTERVAL):
            write(read())

    poller = threading.Thread(target=poll, name="bench-progress", daemon=True)
    poller.start()
    try:
        yield
    finally:
        done.set()
        poller.join()
        write(read())


__all__ = ["POLL_INTERVAL", "Progress", "polling"]
