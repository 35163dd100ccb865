"""Turning the ``ids`` argument of an operation into arrays an engine can bind.

``ids`` is one id or an iterable of ids, where an id is a UUID, its string form, or a
:class:`~.records.Job` returned by ``fetch``. A Job fences the change to the attempt it was
fetched in, named by its ``retry_count`` (every fetch after the first raises it, so it
changes exactly when ``started_on`` does); a bare id acts on the current attempt.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import attrs

from .errors import InvalidOptions
from .records import Job

IdLike = uuid.UUID | str | Job


@attrs.frozen
class Targets:
    """Parallel arrays: ids, and the attempt each is fenced to (None for bare ids)."""

    ids: list[uuid.UUID]
    retry_counts: list[int | None]

    def __len__(self) -> int:
        return len(self.ids)


def _one(value: object) -> tuple[uuid.UUID, int | None]:
    if isinstance(value, Job):
        return value.id, value.retry_count
    if isinstance(value, uuid.UUID):
        return value, None
    if isinstance(value, str):
        try:
            return uuid.UUID(value), None
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
    )
