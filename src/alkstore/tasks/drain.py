"""Run a registry's due jobs in-process until none is due: the testing helper
(``tasks.drain(store)``, docs/testing.md), Oban's ``drain_queue``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

from ..worker.loop import LoopThread
from ..worker.settle import Settlement, settle
from .task import Task

if TYPE_CHECKING:
    from ..store import AsyncStore, Store


@attrs.frozen
class Drained:
    """What a drain ran: jobs ``completed`` and jobs ``failed`` (the task raised, or returned
    what cannot be stored; such a job retries while it has retries left, and a retry that
    falls due during the drain runs in it too)."""

    completed: int = 0
    failed: int = 0

    @property
    def ran(self) -> int:
        """Every task call the drain made."""
        return self.completed + self.failed

    def __add__(self, other: Drained) -> Drained:
        return Drained(self.completed + other.completed, self.failed + other.failed)


def _counted(outcome: Settlement) -> Drained:
    return Drained(outcome.completions, len(outcome.failed))


@contextlib.contextmanager
def _loop_for(tasks: list[Task[Any, Any]]) -> Iterator[LoopThread | None]:
    """An event loop for the async tasks of a sync drain (None when there are none)."""
    loop = LoopThread("alkstore-drain") if any(t.is_async for t in tasks) else None
    try:
        yield loop
    finally:
        if loop is not None:
            loop.close()


def drain(store: Store, tasks: list[Task[Any, Any]]) -> Drained:
    """Run the due jobs of ``tasks``' queues, one at a time, until a round finds none."""
    total = Drained()
    with _loop_for(tasks) as loop:
        while True:
            ran = Drained()
            for task in tasks:
                for job in store.fetch(task.queue):
                    try:
                        result = task.call_with(job.data)
                        if task.is_async:
                            assert loop is not None
                            result = loop.run(result)
                        outcome = settle(store._ops, task.queue, [job], batch=False, result=result)
                    except Exception as exc:
                        outcome = settle(store._ops, task.queue, [job], batch=False, error=exc)
                    for plan in outcome.plans:
                        store._run(plan)
                    ran += _counted(outcome)
            if not ran.ran:
                return total
            total += ran


async def drain_async(store: AsyncStore, tasks: list[Task[Any, Any]]) -> Drained:
    """:func:`drain` on an :class:`~alkstore.AsyncStore` (sync tasks run in a thread)."""
    total = Drained()
    while True:
        ran = Drained()
        for task in tasks:
            for job in await store.fetch(task.queue):
                try:
                    if task.is_async:
                        result = await task.call_with(job.data)
                    else:
                        result = await asyncio.to_thread(task.call_with, job.data)
                    outcome = settle(store._ops, task.queue, [job], batch=False, result=result)
                except Exception as exc:
                    outcome = settle(store._ops, task.queue, [job], batch=False, error=exc)
                for plan in outcome.plans:
                    await store._run(plan)
                ran += _counted(outcome)
        if not ran.ran:
            return total
        total += ran


__all__ = ["Drained", "drain", "drain_async"]
