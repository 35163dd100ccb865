"""What a worker and the supervisor report, to ``logging`` and to ``on_event``."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

logger = logging.getLogger("alkstore.worker")


@attrs.frozen
class WorkerEvent:
    """One thing that happened: ``kind`` names it, ``queue`` says where (None: store-wide).

    Kinds: ``handler_failed`` (a job failed with the handler's exception: logged at WARNING
    with its ``stack``), ``settle_error`` /
    ``fetch_error`` / ``watch_error`` / ``maintenance_error`` (a database call failed; the
    loop carries on; a ``settle_error`` leaves its jobs to expire), ``settle_retry`` (a
    settle met a connection fault and runs again: fenced by the job's attempt, a repeat is
    harmless), ``late_return`` (a handler returned after ``stop`` failed its jobs: its
    result is dropped), ``stopped`` (jobs still running when ``stop`` gave up waiting, failed
    so that they retry), ``maintenance`` (a pass did something), ``schedule_fired``,
    ``listen_error`` (the LISTEN connection failed; it reconnects, polling covers the gap),
    ``listen_unsupported`` (the driver cannot wait for notifications: polling only),
    ``backlog`` (more jobs queued than the worker's ``warning_size``), ``slow_query`` (a
    database call of the runtime took longer than ``slow_query_seconds``).
    """

    kind: str
    queue: str | None
    detail: Mapping[str, Any] = attrs.field(factory=dict)


_LEVELS = {
    "handler_failed": logging.WARNING,
    "maintenance": logging.INFO,
    "schedule_fired": logging.INFO,
    "stopped": logging.WARNING,
    "settle_retry": logging.INFO,
    "late_return": logging.WARNING,
    "listen_unsupported": logging.WARNING,
    "backlog": logging.WARNING,
    "slow_query": logging.WARNING,
}


def emit(callback: Callable[[WorkerEvent], None] | None, event: WorkerEvent) -> None:
    """Log ``event`` and hand it to ``callback``; a failing callback is logged, not raised."""
    level = _LEVELS.get(event.kind, logging.ERROR)
    detail = {k: v for k, v in event.detail.items() if k != "stack"}
    stack = event.detail.get("stack")
    logger.log(
        level,
        "%s on %s: %s%s",
        event.kind,
        event.queue or "store",
        detail,
        f"\n{stack.rstrip()}" if stack else "",
        extra=log_extra(event),
    )
    if callback is not None:
        try:
            callback(event)
        except Exception:
            logger.exception("on_event callback failed for %s", event.kind)


def log_extra(event: WorkerEvent) -> dict[str, Any]:
    """The ``extra`` fields of an event's log record (docs/observability.md): ``alkstore_event``
    (its kind), ``queue`` (None: store-wide) and ``job_id`` (the job's id, or the list of
    ids of the jobs it concerns; None when it concerns none)."""
    job_id = event.detail.get("job", event.detail.get("jobs"))
    return {"alkstore_event": event.kind, "queue": event.queue, "job_id": job_id}


@contextlib.contextmanager
def timed(
    callback: Callable[[WorkerEvent], None] | None,
    queue: str | None,
    operation: str,
    limit: float,
) -> Iterator[None]:
    """Around a database call: a ``slow_query`` event when it took more than ``limit`` s."""
    began = time.perf_counter()
    yield
    took = time.perf_counter() - began
    if took > limit:
        emit(callback, WorkerEvent("slow_query", queue, {"operation": operation, "seconds": took}))
