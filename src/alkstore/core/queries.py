"""Finding and editing jobs: the arguments of ``find_jobs``, ``update`` and ``upsert``,
validated at the API edge (see ``docs/queues.md``, "Finding and editing jobs")."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .errors import InvalidOptions
from .options import _job_id, dump_json
from .records import Job
from .states import JobState
from .validation import boolean, int_at_least, optional_text


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


# --- searching a queue's jobs page by page (the dashboard's key and text filters) ---

MAX_SCAN = 100_000
"""The most jobs one :class:`JobSearch` page examines."""


def _states(value: object) -> tuple[JobState, ...]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, Iterable):
        raise InvalidOptions("states", value, "must be job states")
    out = []
    for state in names:
        try:
            out.append(JobState(state))
        except ValueError:
            raise InvalidOptions("states", state, f"job states are {', '.join(JobState)}") from None
    return tuple(out)


def _scan(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    int_at_least(1)(_inst, attribute, value)
    if value > MAX_SCAN:
        raise InvalidOptions(attribute.name, value, f"must be at most {MAX_SCAN}")


@attrs.frozen(kw_only=True)
class JobSearch:
    """One page of ``search_jobs``: the jobs after ``after`` (id order) in ``states`` (all
    when empty) with that ``singleton_key`` and whose data's JSON text contains ``text``
    (case-insensitive), looking at no more than ``scan`` jobs."""

    states: tuple[JobState, ...] = attrs.field(default=(), converter=_states)
    key: str | None = attrs.field(default=None, validator=optional_text(200))
    text: str | None = attrs.field(default=None, validator=optional_text(200))
    after: uuid.UUID | None = attrs.field(default=None, converter=_job_id)
    limit: int = attrs.field(default=100, validator=int_at_least(1))
    scan: int = attrs.field(default=10_000, validator=_scan)


@attrs.frozen
class JobPage:
    """A page of ``search_jobs``."""

    jobs: list[Job]
    """The matching jobs, in id order (at most the search's ``limit``)."""
    next_after: uuid.UUID | None
    """Where the next page starts (its ``after``); None when no job is left to look at. A
    page can hold fewer than ``limit`` jobs, even none, and still have a next one: it
    stopped after looking at ``scan`` jobs."""
