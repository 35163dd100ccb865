"""The event loop the benchmarks' async cells run on: uvloop (the default) or asyncio's own.

asyncpg is built for uvloop, and pgqueuer's own command runs on it: at one job a fetch the
asyncpg drain spent about a quarter less client CPU a job on uvloop than on asyncio's loop
(docs/benchmarks.md#the-event-loop). So every async system of a comparison -- alkstore's
async drivers and the async peers alike -- runs on the loop chosen here, one choice per
command (``--event-loop``), recorded in the results file.

The choice is per process: the command makes it with :func:`choose` before it measures
anything, and :func:`.isolation.run_isolated` makes the same one in each cell's process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from importlib import metadata
from typing import Any, TypeVar

T = TypeVar("T")

EVENT_LOOPS = ("uvloop", "asyncio")
"""The loops a command can run its async cells on."""
DEFAULT = "uvloop"
"""The loop ``alkstore bench`` runs on unless told otherwise."""

_chosen = "asyncio"
"""This process's loop: asyncio's own until a command chooses."""


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes a loop of kind ``name``; a clear error when uvloop is not installed."""
    if name == "asyncio":
        return asyncio.new_event_loop
    if name != "uvloop":
        raise ValueError(f"event loop {name!r} is not one of {', '.join(EVENT_LOOPS)}")
    try:
        import uvloop
    except ImportError:
        raise ValueError(
            "event loop 'uvloop' needs the uvloop package (pip install 'alkstore[bench]'); "
            "or run on asyncio's own loop with --event-loop asyncio"
        ) from None
    return uvloop.new_event_loop


def choose(name: str) -> None:
    """Run this process's async cells on ``name``'s loop (checked now, not at the first cell)."""
    global _chosen
    loop_factory(name)
    _chosen = name


def chosen() -> str:
    """The loop this process's async cells run on."""
    return _chosen


def described() -> str:
    """The chosen loop with its version, for the results file (``uvloop 0.23.0``)."""
    if _chosen == "uvloop":
        return f"uvloop {metadata.version('uvloop')}"
    return "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the chosen loop."""
    with asyncio.Runner(loop_factory=loop_factory(_chosen)) as runner:
        return runner.run(main)


__all__ = ["DEFAULT", "EVENT_LOOPS", "choose", "chosen", "described", "loop_factory", "run"]
