"""Paced sends for ``bench latency``, shared by alkstore's consumers and the Python peers.

A sender sends one job every ``1 / rate`` seconds; each job carries the ``perf_counter``
time its send began, and the consumer subtracts it from the time its handler started. The
seconds each send took are kept too: a durable send waits for its commit's WAL flush, the
floor under every system's latency on the same disk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence


def delays(total: int, rate: float) -> Iterator[float]:
    """Before each of ``total`` sends: how long to wait so they go out at ``rate`` a second."""
    began = time.perf_counter()
    for n in range(total):
        yield began + n / rate - time.perf_counter()


def paced_sync(total: int, rate: float, send: Callable[[float], object]) -> list[float]:
    """Call ``send(began)`` ``total`` times at ``rate``; the seconds each call took."""
    took: list[float] = []
    for delay in delays(total, rate):
        if delay > 0:
            time.sleep(delay)
        began = time.perf_counter()
        send(began)
        took.append(time.perf_counter() - began)
    return took


async def paced_async(
    total: int, rate: float, send: Callable[[float], Awaitable[object]]
) -> list[float]:
    """:func:`paced_sync` for a coroutine ``send``."""
    took: list[float] = []
    for delay in delays(total, rate):
        if delay > 0:
            await asyncio.sleep(delay)
        began = time.perf_counter()
        await send(began)
        took.append(time.perf_counter() - began)
    return took


def after_commit(
    handled: Sequence[tuple[float, float]], began: Sequence[float], took: Sequence[float]
) -> list[float]:
    """Seconds from each send's return (its commit acknowledged) to its handler's start.

    ``handled``: (the ``perf_counter`` time the job's send began, as the job carries it; the
    time its handler started) per handled job; ``began`` and ``took``: each send's start
    and duration, in sending order. Negative where the handler started before the sender
    read its commit's answer (the server notifies listeners as it commits).
    """
    returned = {start: start + seconds for start, seconds in zip(began, took, strict=True)}
    return [started - returned[sent] for sent, started in handled if sent in returned]


def deadline_after(total: int, rate: float) -> float:
    """Seconds a consumer waits for the last of ``total`` jobs sent at ``rate``."""
    return total / rate + 60.0


__all__ = ["after_commit", "deadline_after", "delays", "paced_async", "paced_sync"]
