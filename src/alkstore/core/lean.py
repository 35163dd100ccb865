"""The lean :class:`~.records.Job` that ``fetch`` returns by default (docs/guide.md, "Lean
jobs").

A worker needs a job's id, queue, data, its attempt (``retry_count``, the fence that
``complete``/``fail`` check), and what shapes its handling; the rest of the record (times,
retry settings, retention, dead-letter lineage, output) is the job's metadata, read by
``fetch(..., include_metadata=True)`` or ``get_job``. Not reading it saves the server, the
wire and the client a row of 31 columns per job.

A lean job is a :class:`~.records.Job` (``isinstance`` holds, it fences ``complete`` and
``fail`` like a full one) whose metadata fields are absent, not empty: reading one raises
:class:`~.errors.MetadataNotFetched` (an ``AttributeError``, so ``hasattr`` is False), never a
None that could pass for "not set". ``job.has_metadata`` tells the two apart.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from .errors import MetadataNotFetched
from .plans import Row
from .records import _STATES, Job, as_int, as_json, as_opt_int, as_time, as_uuid
from .states import JobState
from .tracecontext import read_trace_context

LEAN_FIELDS = (
    "id",
    "queue",
    "data",
    "state",
    "priority",
    "retry_count",
    "retry_limit",
    "expire_seconds",
    "heartbeat_seconds",
    "singleton_key",
    "group_id",
    "group_tier",
    "created_on",
    "trace_context",
)
"""The fields a lean job carries: what a worker needs (the trace context links its
processing to the send), in :class:`~.records.Job`'s names."""

METADATA_FIELDS = tuple(a.name for a in attrs.fields(Job) if a.name not in LEAN_FIELDS)
"""The fields a lean job lacks (reading one raises :class:`~.errors.MetadataNotFetched`)."""

# The setters of Job's slot descriptors, in LEAN_FIELDS order: a lean job's fields are set
# through them, past the frozen __setattr__ and the absent fields' properties (bound once:
# looking each descriptor up per field was most of a lean job's construction), one call each
# rather than in a loop (half the cost of building a lean job, which a fetch does per job).
(
    _set_id,
    _set_queue,
    _set_data,
    _set_state,
    _set_priority,
    _set_retry_count,
    _set_retry_limit,
    _set_expire_seconds,
    _set_heartbeat_seconds,
    _set_singleton_key,
    _set_group_id,
    _set_group_tier,
    _set_created_on,
    _set_trace_context,
) = (Job.__dict__[name].__set__ for name in LEAN_FIELDS)
_new = object.__new__


class LeanJob(Job):
    """A :class:`~.records.Job` without its metadata (see the module docstring)."""

    __slots__ = ()
    has_metadata: ClassVar[bool] = False

    @classmethod
    def from_row(cls, row: Row) -> LeanJob:
        """Build from a row of the lean columns (``name`` is the queue, ``data`` JSON text)."""
        get = row.__getitem__
        return cls.of(
            as_uuid(get("id")),
            get("name"),
            as_json(get("data")),
            _STATES.get(get("state")) or JobState(get("state")),
            as_int(get("priority")),
            as_int(get("retry_count")),
            as_int(get("retry_limit")),
            as_int(get("expire_seconds")),
            as_opt_int(get("heartbeat_seconds")),
            get("singleton_key"),
            get("group_id"),
            get("group_tier"),
            as_time(get("created_on")),
            # Kept as the column's text until read (see _trace_context).
            row.get("trace_context"),
        )

    @classmethod
    def of(
        cls,
        id: Any,
        queue: Any,
        data: Any,
        state: Any,
        priority: Any,
        retry_count: Any,
        retry_limit: Any,
        expire_seconds: Any,
        heartbeat_seconds: Any,
        singleton_key: Any,
        group_id: Any,
        group_tier: Any,
        created_on: Any,
        trace_context: Any,
    ) -> LeanJob:
        """A lean job from the values of :data:`LEAN_FIELDS`, in that order."""
        job: LeanJob = _new(cls)
        _set_id(job, id)
        _set_queue(job, queue)
        _set_data(job, data)
        _set_state(job, state)
        _set_priority(job, priority)
        _set_retry_count(job, retry_count)
        _set_retry_limit(job, retry_limit)
        _set_expire_seconds(job, expire_seconds)
        _set_heartbeat_seconds(job, heartbeat_seconds)
        _set_singleton_key(job, singleton_key)
        _set_group_id(job, group_id)
        _set_group_tier(job, group_tier)
        _set_created_on(job, created_on)
        _set_trace_context(job, trace_context)
        return job

    @classmethod
    def of_job(cls, job: Job) -> LeanJob:
        """The lean form of a full job."""
        return cls.of(*(getattr(job, name) for name in LEAN_FIELDS))

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in LEAN_FIELDS)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in LEAN_FIELDS)
        return f"Job({shown}, <metadata not fetched>)"

    def __eq__(self, other: object) -> bool:
        if type(other) is not LeanJob:
            return NotImplemented
        return self._values() == other._values()

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[Any, ...]:
        return (LeanJob.of, self._values())


def _absent(name: str) -> property:
    def get(self: LeanJob) -> Any:
        raise MetadataNotFetched(name)

    return property(get, doc=f"Not fetched: reading ``{name}`` raises MetadataNotFetched.")


for _name in METADATA_FIELDS:
    setattr(LeanJob, _name, _absent(_name))

_get_trace_context = Job.__dict__["trace_context"].__get__


def _trace_context(self: LeanJob) -> dict[str, str] | None:
    # A fetched job holds its stored context as the column's text and reads it on first use:
    # most fetches never look at it (only a processing span or the application does), and
    # building a mapping per job was a measurable part of the instrumented drain's client
    # CPU (docs/observability.md, "Overhead").
    stored = _get_trace_context(self, LeanJob)
    if isinstance(stored, str):
        stored = read_trace_context(stored)
        _set_trace_context(self, stored)
    return stored  # type: ignore[no-any-return]


LeanJob.trace_context = property(  # type: ignore[assignment]
    _trace_context, doc="The job's trace context (see :attr:`.records.Job.trace_context`)."
)


def lean_jobs(jobs: list[Job]) -> list[Job]:
    """``jobs`` in their lean form (for engines that read full rows only)."""
    return [LeanJob.of_job(job) for job in jobs]


__all__ = ["LEAN_FIELDS", "METADATA_FIELDS", "LeanJob", "lean_jobs"]
