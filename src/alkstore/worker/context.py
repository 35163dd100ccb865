"""What a handler that takes two arguments receives with its job: a :class:`JobContext`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.records import Job


class JobContext:
    """The context of one handler call on a :class:`~alkstore.Store` worker.

    ``cancelled`` is set when the job is cancelled, expires or loses its heartbeat (seen by
    the worker's watch, about every ``watch_interval`` seconds), or the worker is stopping:
    a long handler checks it and returns early. ``connection`` is the client library's
    connection whose transaction commits with the job's completion (transactional workers
    only, else None).
    """

    def __init__(
        self, jobs: list[Job], touch: Callable[[list[Job]], bool], connection: Any = None
    ) -> None:
        self.jobs = jobs
        """The jobs of this call (one unless the worker runs with ``batch=True``)."""
        self.cancelled = threading.Event()
        self.connection = connection
        self._touch = touch

    @property
    def job(self) -> Job:
        """The job of this call (the first one of a batch)."""
        return self.jobs[0]

    def heartbeat(self) -> bool:
        """Record that the job is alive now; False (and ``cancelled`` set) if it no longer
        runs in this attempt."""
        alive = self._touch(self.jobs)
        if not alive:
            self.cancelled.set()
        return alive


class AsyncJobContext:
    """The context of one handler call on an :class:`~alkstore.AsyncStore` worker: as
    :class:`JobContext`, with an :class:`asyncio.Event` and a coroutine ``heartbeat``."""

    def __init__(
        self,
        jobs: list[Job],
        touch: Callable[[list[Job]], Awaitable[bool]],
        connection: Any = None,
    ) -> None:
        self.jobs = jobs
        """The jobs of this call (one unless the worker runs with ``batch=True``)."""
        self.cancelled = asyncio.Event()
        self.connection = connection
        self._touch = touch

    @property
    def job(self) -> Job:
        """The job of this call (the first one of a batch)."""
        return self.jobs[0]

    async def heartbeat(self) -> bool:
        """See :meth:`JobContext.heartbeat`."""
        alive = await self._touch(self.jobs)
        if not alive:
            self.cancelled.set()
        return alive
