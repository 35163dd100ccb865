"""The options of ``store.work()``, checked before anything starts."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

import attrs

from ..core.errors import InvalidOptions
from ..core.options import GroupLimit, group_limit
from ..core.validation import boolean, int_at_least
from .events import WorkerEvent


def _positive_seconds(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    if not ok or not math.isfinite(value):
        raise InvalidOptions(attribute.name, value, "must be a number of seconds > 0")


def _callback(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(value):
        raise InvalidOptions(attribute.name, value, "must be callable or None")


@attrs.frozen(kw_only=True)
class WorkOptions:
    """How a worker runs. ``batch_size`` is the most jobs one fetch claims for one handler
    call, so it needs ``batch=True``: without it a fetch claims one job per free handler."""

    concurrency: int = attrs.field(default=1, validator=int_at_least(1))
    """Handler calls running at once (threads on :class:`Store`, tasks on AsyncStore)."""
    batch_size: int = attrs.field(default=1, validator=int_at_least(1))
    batch: bool = attrs.field(default=False, validator=boolean)
    """The handler receives ``list[Job]`` (up to ``batch_size`` jobs) instead of one job."""
    transactional: bool = attrs.field(default=False, validator=boolean)
    """The handler's writes on ``ctx.connection`` and the settlement commit together."""
    poll_interval: float = attrs.field(default=1.0, validator=_positive_seconds)
    """Seconds between fetches of an idle worker when no wake-up arrives (the backstop)."""
    watch_interval: float = attrs.field(default=1.0, validator=_positive_seconds)
    """Seconds between checks of running jobs (heartbeats, and cancellation reaching
    ``ctx.cancelled``); shorter when a job's ``heartbeat_seconds`` needs it."""
    maintenance: bool = attrs.field(default=True, validator=boolean)
    """Run the store's supervisor (expiry, heartbeat loss, retention, deletion, cron)."""
    maintenance_interval: float = attrs.field(default=1.0, validator=_positive_seconds)
    """Seconds between maintenance passes, across every process that runs workers."""
    warning_size: int | None = attrs.field(default=None, validator=int_at_least(1, optional=True))
    """Queued jobs above which a maintenance pass reports a ``backlog`` event (None: never)."""
    slow_query_seconds: float = attrs.field(default=1.0, validator=_positive_seconds)
    """A database call of the worker slower than this reports a ``slow_query`` event."""
    on_event: Callable[[WorkerEvent], None] | None = attrs.field(default=None, validator=_callback)
    """Called with every :class:`WorkerEvent` (they also go to ``logging``)."""
    group_concurrency: GroupLimit | None = attrs.field(default=None, converter=group_limit)
    """At most this many active jobs per ``group_id`` (N, or ``{"default": N, "tiers": {"gold":
    M}}``), held by the claim across every worker and process (docs/queues.md, "Groups")."""
    durable_claims: bool = attrs.field(default=False, validator=boolean)
    """An idle worker's fetch waits for its claim's WAL flush. Off (the default) it commits
    without waiting where the engine has ``asynchronous_commit``: the wake-up path pays one
    flush (the send's) instead of two; a server crash can lose only the last claims, whose
    jobs are then delivered again (docs/workers.md, "Latency and durable claims")."""

    def __attrs_post_init__(self) -> None:
        if self.batch_size > 1 and not self.batch:
            raise InvalidOptions(
                "batch_size",
                self.batch_size,
                "needs batch=True (without it each fetch claims one job per free handler)",
            )

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> WorkOptions:
        """Build from ``work()``'s keyword arguments, naming an unknown one."""
        known = {a.name for a in attrs.fields(cls)}
        for name, value in kwargs.items():
            if name not in known:
                raise InvalidOptions(name, value, f"unknown option; known: {sorted(known)}")
        return cls(**kwargs)


class AppWorkKwargs(TypedDict, total=False):
    """Keyword options of ``Tasks.worker()``: those of ``work()`` that apply to a task (a
    task gets its arguments, not a job and a context), as :class:`WorkOptions` checks them."""

    poll_interval: float
    watch_interval: float
    maintenance: bool
    maintenance_interval: float
    warning_size: int | None
    slow_query_seconds: float
    on_event: Callable[[WorkerEvent], None] | None
    group_concurrency: int | Mapping[str, Any] | GroupLimit | None
    durable_claims: bool


class WorkKwargs(AppWorkKwargs, total=False):
    """Keyword options of ``work()`` besides ``concurrency``, ``batch`` and ``batch_size``
    (which its overloads name), as :class:`WorkOptions` checks them; a test keeps the names
    in step."""

    transactional: bool
