"""Paced sends for ``bench latency``, shared by alkstore's consumers and the Python peers.

A sender sends one job every ``1 / rate`` seconds; each job carries the ``perf_counter``
time its send began, and the consumer subtracts it from the time its handler started. The
seconds each send took are kept too: a durable send waits for its commit's WAL flush, the
floor under every system's latency on the same disk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator


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


def deadline_after(total: int, rate: float) -> float:
    """Seconds a consumer waits for the last of ``total`` jobs sent at ``rate``."""
    return total / rate + 60.0


__all__ = ["deadline_after", "delays", "paced_async", "paced_sync"]
