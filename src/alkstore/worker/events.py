"""What a worker and the supervisor report, to ``logging`` and to ``on_event``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

logger = logging.getLogger("alkstore.worker")


@attrs.frozen
class WorkerEvent:
    """One thing that happened: ``kind`` names it, ``queue`` says where (None: store-wide).

    Kinds: ``handler_failed`` (a job failed with the handler's exception), ``settle_error`` /
    ``fetch_error`` / ``watch_error`` / ``maintenance_error`` (a database call failed; the
    loop carries on), ``stopped`` (jobs still running when ``stop`` gave up waiting, failed
    so that they retry), ``maintenance`` (a pass did something), ``schedule_fired``,
    ``listen_error`` (the LISTEN connection failed; it reconnects, polling covers the gap),
    ``listen_unsupported`` (the driver cannot wait for notifications: polling only).
    """

    kind: str
    queue: str | None
    detail: Mapping[str, Any] = attrs.field(factory=dict)


_LEVELS = {
    "handler_failed": logging.INFO,
    "maintenance": logging.INFO,
    "schedule_fired": logging.INFO,
    "stopped": logging.WARNING,
    "listen_unsupported": logging.WARNING,
}


def emit(callback: Callable[[WorkerEvent], None] | None, event: WorkerEvent) -> None:
    """Log ``event`` and hand it to ``callback``; a failing callback is logged, not raised."""
    level = _LEVELS.get(event.kind, logging.ERROR)
    logger.log(level, "%s on %s: %s", event.kind, event.queue or "store", dict(event.detail))
    if callback is not None:
        try:
            callback(event)
        except Exception:
            logger.exception("on_event callback failed for %s", event.kind)
