"""What the peers that run their own worker loops (pgqueuer, procrastinate) share.

A schema of their own for the cell, the timed pre-enqueue in batches, and the timed run of
their worker loops with its progress bar and peak RSS.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sized
from typing import Any

from ..drain import numbered_batches
from ..measure import CpuUse, cpu_window, local_postmaster, peak_rss_bytes, reset_peak_rss
from ..progress import Progress
from ..results import Cell
from ..server import create_schema, drop_schema


def not_installed(modules: Iterable[str], install: str) -> str | None:
    """``<module> is not installed (<install>)`` for the first of ``modules`` missing, or None."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed ({install})"
    return None


def python_library_versions() -> dict[str, object]:
    """Recorded with the other Python libraries."""
    return {}


@contextlib.contextmanager
def fresh_schema(dsn: str, schema: str) -> Iterator[None]:
    """Create ``schema`` for the block and drop it afterwards."""
    create_schema(dsn, schema)
    try:
        yield
    finally:
        drop_schema(dsn, schema)


async def timed_enqueue(jobs: int, send: Callable[[range], Awaitable[object]]) -> float:
    """``send`` the job numbers ``0 .. jobs - 1`` in batches; the seconds it took."""
    began = time.perf_counter()
    for numbers in numbered_batches(jobs):
        await send(numbers)
    return time.perf_counter() - began


async def time_worker_loops(
    progress: Progress,
    cell: Cell,
    jobs: int,
    done: Sized,
    loops: Iterable[Awaitable[Any]],
    timeout: float,
    dsn: str,
) -> tuple[float, int, CpuUse]:
    """Reset the peak RSS, then run ``loops`` together (``len(done)`` of ``jobs`` shown).

    Returns the wall seconds until every loop ended, the peak RSS after, and the CPU time
    the loops cost this process and the server at ``dsn``; raises
    :class:`TimeoutError` after ``timeout`` seconds. ``loops`` is iterated (each loop created)
    once the clock has started.
    """
    postmaster = await asyncio.to_thread(local_postmaster, dsn)
    reset_peak_rss()
    with (
        cpu_window(postmaster) as cpu,
        progress.track(cell.description, jobs, lambda: len(done)),
    ):
        began = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*loops), timeout)
        seconds = time.perf_counter() - began
    return seconds, peak_rss_bytes(), cpu


__all__ = [
    "fresh_schema",
    "not_installed",
    "python_library_versions",
    "time_worker_loops",
    "timed_enqueue",
]
