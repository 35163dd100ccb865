"""Each measured cell in a fresh process, so one cell's memory and threads never touch another's.

Peak RSS is a per-process figure: a Python process keeps the memory an earlier cell grew
to (a peer holding 50,000 jobs in memory, say). So every drain cell runs in its own spawned
interpreter. The child reports progress through a shared counter that the parent's progress
bar polls, and returns its result (or raises its error) through the pool.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from . import event_loop
from .progress import Progress, polling

T = TypeVar("T")

_counter: Any = None
"""In a child: the shared counter its progress goes to."""


class SharedCounterProgress:
    """A child's progress: ``read()`` copied into the counter the parent polls."""

    def track(
        self, description: str, total: int, read: Callable[[], int]
    ) -> contextlib.AbstractContextManager[None]:
        """Copy ``read()`` into the shared counter while the block runs."""

        def write(value: int) -> None:
            _counter.value = value

        write(0)
        return polling(read, write)


def _init_child(counter: Any, loop: str) -> None:
    global _counter
    _counter = counter
    event_loop.choose(loop)


def run_isolated(
    progress: Progress,
    description: str,
    total: int,
    function: Callable[..., T],
    *args: Any,
) -> T:
    """``function(SharedCounterProgress(), *args)`` in a fresh process; its result.

    ``function`` must be a module-level function (it is pickled by name) taking the child's
    progress as its first argument. The child runs its async cells on this process's
    :mod:`.event_loop`.
    """
    context = multiprocessing.get_context("spawn")
    counter = context.Value("q", 0)
    with (
        ProcessPoolExecutor(
            max_workers=1,
            mp_context=context,
            initializer=_init_child,
            initargs=(counter, event_loop.chosen()),
        ) as pool,
        progress.track(description, total, lambda: int(counter.value)),
    ):
        future = pool.submit(_call, function, *args)
        return future.result()


def _call(function: Callable[..., T], *args: Any) -> T:
    return function(SharedCounterProgress(), *args)


__all__ = ["SharedCounterProgress", "run_isolated"]
