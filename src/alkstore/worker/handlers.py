"""The types of the handlers ``work()`` takes, so that a type checker tells a single-job
handler from a batch handler and a sync one from an async one where ``work()`` is called."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

from ..core.records import Job
from .context import AsyncJobContext, JobContext

Output: TypeAlias = bool | int | float | str | Sequence[Any] | Mapping[Any, Any] | None
"""What a handler returns: the job's output, a JSON value (an awaitable is none)."""

BatchOutput: TypeAlias = Mapping[uuid.UUID, Any] | None
"""What a batch handler returns: None (every job completes), or ``{job.id: output |
Exception}``."""

Handler: TypeAlias = Callable[[Job], Output] | Callable[[Job, JobContext], Output]
"""A :class:`~alkstore.Store` handler of one job (with or without its context)."""

BatchHandler: TypeAlias = (
    Callable[[list[Job]], BatchOutput] | Callable[[list[Job], JobContext], BatchOutput]
)
"""A :class:`~alkstore.Store` handler of a batch (``batch=True``)."""

AsyncHandler: TypeAlias = (
    Callable[[Job], Awaitable[Output]]
    | Callable[[Job, AsyncJobContext], Awaitable[Output]]
    | Callable[[Job], Output]
    | Callable[[Job, AsyncJobContext], Output]
)
"""An :class:`~alkstore.AsyncStore` handler of one job: a coroutine function, or a plain one
(it runs on the event loop: keep it short)."""

AsyncBatchHandler: TypeAlias = (
    Callable[[list[Job]], Awaitable[BatchOutput]]
    | Callable[[list[Job], AsyncJobContext], Awaitable[BatchOutput]]
    | Callable[[list[Job]], BatchOutput]
    | Callable[[list[Job], AsyncJobContext], BatchOutput]
)
"""An :class:`~alkstore.AsyncStore` handler of a batch (``batch=True``)."""

__all__ = [
    "AsyncBatchHandler",
    "AsyncHandler",
    "BatchHandler",
    "BatchOutput",
    "Handler",
    "Output",
]
