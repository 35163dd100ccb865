"""Turning the ``ids`` argument of an operation into arrays an engine can bind.

``ids`` is one id or an iterable of ids, where an id is a UUID, its string form, or a
:class:`~.records.Job` returned by ``fetch``. A Job fences the change to the attempt it was
fetched in (same ``retry_count`` and ``started_on``); a bare id acts on the current attempt.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable

import attrs

from .errors import InvalidOptions
from .records import Job

IdLike = uuid.UUID | str | Job


@attrs.frozen
class Targets:
    """Parallel arrays: ids, and the fence (None for bare ids) of each."""

    ids: list[uuid.UUID]
    retry_counts: list[int | None]
    started_ons: list[dt.datetime | None]

    def __len__(self) -> int:
        return len(self.ids)


def _one(value: object) -> tuple[uuid.UUID, int | None, dt.datetime | None]:
    if isinstance(value, Job):
        return value.id, value.retry_count, value.started_on
    if isinstance(value, uuid.UUID):
        return value, None, None
    if isinstance(value, str):
        try:
            return uuid.UUID(value), None, None
        except ValueError:
            pass
    raise InvalidOptions("ids", value, "must be a UUID, a UUID string or a Job")


def targets(ids: IdLike | Iterable[IdLike]) -> Targets:
    """Normalise ``ids``; an invalid element raises :class:`InvalidOptions`."""
    items: Iterable[object] = [ids] if isinstance(ids, uuid.UUID | str | Job) else ids
    if not isinstance(items, Iterable):
        raise InvalidOptions("ids", ids, "must be an id, a Job, or an iterable of them")
    parts = [_one(v) for v in items]
    return Targets(
        ids=[p[0] for p in parts],
        retry_counts=[p[1] for p in parts],
        started_ons=[p[2] for p in parts],
    )
