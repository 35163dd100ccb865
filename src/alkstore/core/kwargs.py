"""The keyword options of the public calls as TypedDicts, so a type checker catches a misspelt
or mistyped option (``retires=3``) where the call is written.

Each mirrors the attrs class that validates the same options at run time
(:class:`~.options.QueueOptions`, :class:`~.options.JobOptions`, ``ConnectOptions``); a test
keeps their names in step.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any, TypedDict

from .options import Policy


class QueueOptionsKwargs(TypedDict, total=False):
    """Keyword options of ``create_queue`` and ``update_queue`` (see ``QueueOptions``)."""

    retry_limit: int
    retry_delay: int
    retry_backoff: bool
    retry_delay_max: int | None
    expire_seconds: int
    heartbeat_seconds: int | None
    retention_seconds: int
    deletion_seconds: int
    policy: Policy | str
    dead_letter: str | None
    partition: bool
    concurrency_limit: int | None


class PerJobKwargs(TypedDict, total=False):
    """The options of ``send`` that only a job has, not its queue (see ``JobOptions``)."""

    priority: int | None
    start_after: dt.datetime | dt.timedelta | float | None
    singleton_key: str | None
    singleton_seconds: int | None
    singleton_next_slot: bool | None
    group_id: str | None
    group_tier: str | None
    trace_context: Mapping[str, str] | None


class JobOptionsKwargs(PerJobKwargs, total=False):
    """Keyword options of ``send`` (see ``JobOptions``): its own, and the queue's options it
    may override for this job."""

    id: uuid.UUID | str | None
    retry_limit: int | None
    retry_delay: int | None
    retry_backoff: bool | None
    retry_delay_max: int | None
    expire_seconds: int | None
    heartbeat_seconds: int | None
    retention_seconds: int | None
    deletion_seconds: int | None
    dead_letter: str | None


class ConnectKwargs(TypedDict, total=False):
    """Keyword options of ``connect`` and ``connect_async`` (see ``ConnectOptions``)."""

    engine: str | None
    driver: str
    schema: str
    pool_size: int
    migrate: bool
    emulate: bool
    engine_options: Mapping[str, Any]
    pooler: str | None
    listen_dsn: str | None
    connect_timeout: float | None
    statement_timeout: float | None
    lock_timeout: float | None


__all__ = ["ConnectKwargs", "JobOptionsKwargs", "QueueOptionsKwargs"]
