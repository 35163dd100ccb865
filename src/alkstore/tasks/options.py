"""A task's defaults: which are the queue's options and which each send's, checked when the
task is declared."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..core.errors import InvalidOptions
from ..core.kwargs import PerJobKwargs, QueueOptionsKwargs
from ..core.options import JobOptions, QueueOptions


class TaskOptionsKwargs(QueueOptionsKwargs, PerJobKwargs, total=False):
    """Keyword defaults of ``@tasks.task``: the options of the task's queue
    (:class:`~alkstore.QueueOptions`) and of each job it sends (:class:`~alkstore.JobOptions`,
    except ``id``). A name both know (``retry_limit``, ``expire_seconds`` …) goes to the queue,
    which is the task's own."""


QUEUE_FIELDS = frozenset(a.name for a in attrs.fields(QueueOptions))
SEND_FIELDS = frozenset(a.name for a in attrs.fields(JobOptions)) - QUEUE_FIELDS - {"id"}


def split_defaults(defaults: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(queue options, send options)`` of a task's defaults, each validated now: an unknown
    or bad option raises :class:`~alkstore.InvalidOptions` naming it."""
    queue: dict[str, Any] = {}
    send: dict[str, Any] = {}
    for name, value in defaults.items():
        if name in QUEUE_FIELDS:
            queue[name] = value
        elif name in SEND_FIELDS:
            send[name] = value
        elif name == "id":
            raise InvalidOptions(name, value, "is chosen per send: task.with_options(id=...)")
        else:
            known = sorted(QUEUE_FIELDS | SEND_FIELDS)
            raise InvalidOptions(name, value, f"unknown task option; known: {known}")
    QueueOptions(**queue)
    JobOptions(**send)
    return queue, send


__all__ = ["TaskOptionsKwargs", "split_defaults"]
