"""Finding and editing jobs: the arguments of ``find_jobs``, ``update`` and ``upsert``,
validated at the API edge (see ``docs/queues.md``, "Finding and editing jobs")."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from .errors import InvalidOptions
from .options import _job_id, dump_json
from .validation import boolean, optional_text


class Match(enum.StrEnum):
    """Which of the queued jobs of one ``singleton_key`` ``update`` changes."""

    NEWEST = "newest"
    OLDEST = "oldest"
    ALL = "all"


def _match(value: object) -> Match:
    try:
        return Match(str(value))
    except ValueError:
        raise InvalidOptions(
            "match", value, f"must be one of {', '.join(m.value for m in Match)}"
        ) from None


def _data_filter(value: object) -> str | None:
    """``data`` of ``find_jobs``: a mapping whose top-level keys a job's data must contain."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidOptions("data", value, "must be a mapping of top-level keys to match")
    return dump_json("data", dict(value))


@attrs.frozen(kw_only=True)
class JobQuery:
    """What ``find_jobs`` looks for: every given filter must hold."""

    id: uuid.UUID | None = attrs.field(default=None, converter=_job_id)
    key: str | None = attrs.field(default=None, validator=optional_text(200))
    """The job's ``singleton_key``."""
    data_json: str | None = None
    """JSON of a mapping the job's ``data`` must contain (``jsonb @>``)."""
    queued: bool = attrs.field(default=False, validator=boolean)
    """Only jobs in ``created`` or ``retry``."""

    @classmethod
    def build(cls, *, id: Any, key: Any, data: Any, queued: Any) -> JobQuery:
        """Validate the keyword arguments of ``find_jobs``."""
        return cls(id=id, key=key, data_json=_data_filter(data), queued=queued)


@attrs.frozen(kw_only=True)
class JobSelector:
    """The queued job(s) ``update`` or ``upsert`` changes: by ``id``, by ``singleton_key``
    (the newest, the oldest, or all of that key's queued jobs), or both."""

    id: uuid.UUID | None = attrs.field(default=None, converter=_job_id)
    singleton_key: str | None = attrs.field(default=None, validator=optional_text(200))
    match: Match = attrs.field(default=Match.NEWEST, converter=_match)

    def __attrs_post_init__(self) -> None:
        if self.id is None and self.singleton_key is None:
            raise InvalidOptions("id", None, "give id or singleton_key to choose the job")
