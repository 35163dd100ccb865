"""An event loop in a thread of its own, for async handlers run by a sync worker (the app
worker's async tasks, ``alkstore worker`` with an ``async def`` handler); on uvloop where it
is installed."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

CLOSE_TIMEOUT = 30.0
"""Seconds :meth:`LoopThread.close` waits for the loop's thread to end."""


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's where it is installed, else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


class LoopThread:
    """A running event loop in a daemon thread; :meth:`run` runs a coroutine on it from any
    other thread and returns its result."""

    def __init__(self, name: str = "alkstore-loop") -> None:
        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop; wait for its result (or exception)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def blocking(self, handler: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
        """``handler`` (an ``async def``) as a function that runs it on the loop (with its
        signature: a worker passes the context to a handler that takes one)."""

        @functools.wraps(handler)
        def call(*args: Any) -> T:
            return self.run(handler(*args))

        return call

    def close(self) -> None:
        """Cancel the coroutines still running (a thread waiting in :meth:`run` gets
        ``CancelledError`` instead of waiting forever), stop the loop and close it."""
        if self.loop.is_closed():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop).result(CLOSE_TIMEOUT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CLOSE_TIMEOUT)
        if not self._thread.is_alive():
            self.loop.close()


async def _cancel_all() -> None:
    """Cancel every other task of the running loop and wait for them to end."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


__all__ = ["LoopThread", "new_event_loop"]
