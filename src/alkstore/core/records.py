"""The value types returned to users: Job, Queue, QueueStats, MaintenanceReport.

Rows arrive from different drivers and engines with slightly different types (an integer as
text on CockroachDB, asyncpg's own UUID class, JSON as text); the ``from_row`` builders
normalise them so every engine/driver pair returns identical values.
"""

from __future__ import annotations

import datetime as dt
import json
import json.scanner
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import attrs

from .ids import uuid_of_int
from .options import Policy, QueueOptions
from .plans import Row
from .states import JobState
from .tracecontext import read_trace_context


def as_int(value: Any) -> int:
    """An integer column as int (CockroachDB may send INT8 as text)."""
    return value if type(value) is int else int(value)


def as_opt_int(value: Any) -> int | None:
    """A nullable integer column."""
    return value if value is None or type(value) is int else int(value)


def as_uuid(value: Any) -> uuid.UUID:
    """A uuid column as :class:`uuid.UUID` (asyncpg has its own UUID class)."""
    if type(value) is uuid.UUID:
        return value
    if isinstance(value, uuid.UUID):
        return uuid_of_int(value.int)
    return uuid.UUID(str(value))


# typeshed types make_scanner's argument as itself; it takes the decoder whose settings it uses.
_scan_json: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]
)
"""The scanner under ``json.loads``, called directly: ``loads`` adds two whitespace regex
matches and three calls per value, a third of a small payload's parse, paid per fetched job."""


def as_json(value: Any) -> Any:
    """A JSON column that the engine selected as text."""
    if value is None:
        return None
    if type(value) is str:
        # The server's JSON text has no surrounding whitespace; anything else is left to
        # json.loads (and its errors).
        try:
            parsed, end = _scan_json(value, 0)
        except StopIteration:
            return json.loads(value)
        if end == len(value):
            return parsed
    return json.loads(value)


def as_time(value: Any) -> dt.datetime | None:
    """A timestamptz column as an aware UTC datetime."""
    if value is None or (type(value) is dt.datetime and value.tzinfo is dt.UTC):
        return value
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    assert isinstance(value, dt.datetime)
    zone = value.tzinfo
    if zone is None:  # a server that sends naive times sends them in UTC
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def as_bool(value: Any) -> bool:
    """A boolean column (some servers send 't'/'f' text)."""
    return value in (True, "t", "true", 1) if not isinstance(value, bool) else value


@attrs.frozen
class FailedAttempt:
    """One failed attempt of a job, in :attr:`Job.errors` (docs/workers.md, "Attempt
    history"): bounded as :mod:`~.attempts` says."""

    attempt: int
    """Which attempt failed: 1 for the first run, ``retry_count + 1`` of that attempt."""
    at: dt.datetime
    """When it failed, on the database's clock."""
    name: str | None
    """The exception's class name (None for an error that was no exception)."""
    message: str | None
    """The exception's message, or the error value given to ``fail``."""
    stack: str | None
    """The traceback, when the error was an exception."""

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> FailedAttempt:
        """Build from one stored entry."""
        return cls(
            as_int(value["attempt"]),
            as_time(value["at"]),  # type: ignore[arg-type]
            value.get("name"),
            value.get("message"),
            value.get("stack"),
        )


def as_errors(value: Any) -> tuple[FailedAttempt, ...]:
    """The ``errors`` column (a JSON array, as text or parsed; NULL: none yet)."""
    entries = as_json(value)
    if not entries:
        return ()
    return tuple(FailedAttempt.from_json(entry) for entry in entries)


@attrs.frozen
class Job:
    """A job as stored. Given to ``complete``/``fail``/``touch``, it fences them to its attempt."""

    id: uuid.UUID
    queue: str
    data: Any
    state: JobState
    priority: int
    retry_count: int
    retry_limit: int
    retry_delay: int
    retry_backoff: bool
    retry_delay_max: int | None
    expire_seconds: int
    heartbeat_seconds: int | None
    retention_seconds: int
    deletion_seconds: int
    singleton_key: str | None
    group_id: str | None
    group_tier: str | None
    start_after: dt.datetime
    created_on: dt.datetime
    started_on: dt.datetime | None
    completed_on: dt.datetime | None
    heartbeat_on: dt.datetime | None
    keep_until: dt.datetime
    output: Any
    source_queue: str | None
    source_id: uuid.UUID | None
    source_retry_count: int | None
    source_root_id: uuid.UUID | None
    """A dead-letter copy: the first job of its chain of dead letters."""
    source_created_on: dt.datetime | None
    """A dead-letter copy: when its source job was created."""
    source_output: Any
    """A dead-letter copy: its source job's output when it failed."""
    dead_letter: str | None
    """The job's own dead-letter queue (None: its queue's, if any)."""
    trace_context: dict[str, str] | None = None
    """The sender's trace context (propagation headers), if it was sent with one; a retry
    and a dead-letter copy keep it (docs/observability.md)."""
    errors: tuple[FailedAttempt, ...] = ()
    """Every failed attempt, oldest first, kept across retries and into a dead-letter copy;
    the latest :data:`~.attempts.MAX_ERRORS` (docs/workers.md, "Attempt history")."""

    has_metadata: ClassVar[bool] = True
    """Whether every field was read: False for the lean jobs ``fetch`` returns by default,
    whose metadata fields raise :class:`~.errors.MetadataNotFetched` (docs/guide.md, "Lean
    jobs")."""

    @classmethod
    def from_row(cls, row: Row) -> Job:
        """Build from a job row (the engine selects ``data`` and ``output`` as JSON text).

        Written for speed (a fetch builds one per job): positional arguments, and each
        column coerced only when the driver did not already deliver the canonical type.
        """
        get = row.__getitem__
        source_id = get("source_id")
        root_id = get("source_root_id")
        return cls(
            as_uuid(get("id")),
            get("name"),
            as_json(get("data")),
            _STATES.get(get("state")) or JobState(get("state")),
            as_int(get("priority")),
            as_int(get("retry_count")),
            as_int(get("retry_limit")),
            as_int(get("retry_delay")),
            as_bool(get("retry_backoff")),
            as_opt_int(get("retry_delay_max")),
            as_int(get("expire_seconds")),
            as_opt_int(get("heartbeat_seconds")),
            as_int(get("retention_seconds")),
            as_int(get("deletion_seconds")),
            get("singleton_key"),
            get("group_id"),
            get("group_tier"),
            as_time(get("start_after")),  # type: ignore[arg-type]
            as_time(get("created_on")),  # type: ignore[arg-type]
            as_time(get("started_on")),
            as_time(get("completed_on")),
            as_time(get("heartbeat_on")),
            as_time(get("keep_until")),  # type: ignore[arg-type]
            as_json(get("output")),
            get("source_queue"),
            None if source_id is None else as_uuid(source_id),
            as_opt_int(get("source_retry_count")),
            None if root_id is None else as_uuid(root_id),
            as_time(get("source_created_on")),
            as_json(get("source_output")),
            get("dead_letter"),
            _trace_context(row),
            as_errors(row.get("errors")),
        )

    def sort_key(self) -> tuple[int, dt.datetime, int]:
        """Fetch order: priority DESC, created_on, id.

        The id compares as its 128-bit integer, which orders as PostgreSQL orders uuids (by
        their bytes) and as ``UUID`` objects do, without their Python-level ``__eq__`` and
        ``__lt__``: the jobs of one ``send_many`` share ``created_on``, so sorting a fetched
        batch of 100 compared ids some 600 times (measured: 82 against 21 µs a sort, 0.6 µs a
        job; docs/benchmarks.md, "Sorting a fetched batch by integers")."""
        return (-self.priority, self.created_on, self.id.int)


def _trace_context(row: Row) -> dict[str, str] | None:
    """The ``trace_context`` column (JSON text, :mod:`.tracecontext`); a row without it (a
    read that leaves it out) has none."""
    return read_trace_context(row.get("trace_context"))


_STATES = {state.value: state for state in JobState}
"""State name -> :class:`JobState` (a dict lookup is cheaper than calling the enum)."""


@attrs.frozen
class Queue:
    """A queue and its settings."""

    name: str
    options: QueueOptions
    created_on: dt.datetime
    updated_on: dt.datetime
    paused: bool = False
    """Fetch hands out nothing while true (``pause_queue`` / ``resume_queue``)."""

    @property
    def policy(self) -> Policy:
        """The queue's policy."""
        return self.options.policy

    @property
    def dead_letter(self) -> str | None:
        """The dead-letter queue, if any."""
        return self.options.dead_letter

    @classmethod
    def from_row(cls, row: Row) -> Queue:
        """Build from a queue row."""
        options = QueueOptions(
            retry_limit=as_int(row["retry_limit"]),
            retry_delay=as_int(row["retry_delay"]),
            retry_backoff=as_bool(row["retry_backoff"]),
            retry_delay_max=as_opt_int(row["retry_delay_max"]),
            expire_seconds=as_int(row["expire_seconds"]),
            heartbeat_seconds=as_opt_int(row["heartbeat_seconds"]),
            retention_seconds=as_int(row["retention_seconds"]),
            deletion_seconds=as_int(row["deletion_seconds"]),
            policy=Policy(row["policy"]),
            dead_letter=row["dead_letter"],
            partition=as_bool(row["partition"]),
            concurrency_limit=as_opt_int(row.get("concurrency_limit")),
        )
        return cls(
            name=row["name"],
            options=options,
            created_on=as_time(row["created_on"]),  # type: ignore[arg-type]
            updated_on=as_time(row["updated_on"]),  # type: ignore[arg-type]
            paused=as_bool(row.get("paused", False)),
        )


@attrs.frozen
class QueueStats:
    """Counts per state and the age of the oldest queued job."""

    queue: str
    counts: dict[JobState, int]
    oldest_queued_age: dt.timedelta | None

    @property
    def queued(self) -> int:
        """Jobs waiting (created + retry)."""
        return self.counts[JobState.CREATED] + self.counts[JobState.RETRY]

    @property
    def total(self) -> int:
        """All jobs in the queue."""
        return sum(self.counts.values())


class Handoff(NamedTuple):
    """What ``complete_and_fetch`` returns: the jobs it completed, and the jobs it claimed."""

    completed: int
    """How many of the given jobs were completed (a stale or fenced-out one is not)."""
    jobs: list[Job]
    """The next jobs, claimed in fetch order (empty when none is queued)."""


@attrs.frozen
class MaintenanceReport:
    """What one maintenance pass did."""

    expired: int = 0
    heartbeat_expired: int = 0
    retention_removed: int = 0
    deleted: int = 0
    flows_released: int = 0
    """Flow jobs released that a crash had left parked after their last parent completed."""


@attrs.frozen(kw_only=True)
class WorkerProcess:
    """A process whose store runs workers, as its supervisor recorded itself
    (``store.worker_processes()``, ``alkstore workers``): refreshed every 10 seconds or so,
    forgotten when its last supervised worker stops, and listed only until ``expires_on``
    (a process that died unannounced drops out then)."""

    owner: str
    """``host:pid:suffix``, the name its maintenance claims carry."""
    host: str
    pid: int
    queues: tuple[str, ...]
    """The queues its workers serve."""
    workers: int
    """How many workers it runs."""
    started_on: dt.datetime
    """When it first recorded itself (the database's clock)."""
    seen_on: dt.datetime
    """When it last recorded itself."""
    expires_on: dt.datetime
    """When it drops out of the list unless it records itself again."""
    ran_last_pass: bool
    """Whether it ran the latest maintenance pass."""

    @classmethod
    def from_row(cls, row: Row) -> WorkerProcess:
        """Build from a supervisor row of a process (``info`` selected as JSON text)."""
        info = json.loads(row["info"])
        expires_on = as_time(row["next_on"])
        started_on = as_time(row["run_on"])
        assert expires_on is not None and started_on is not None
        return cls(
            owner=row["owner"],
            host=info["host"],
            pid=int(info["pid"]),
            queues=tuple(info["queues"]),
            workers=int(info["workers"]),
            started_on=started_on,
            seen_on=expires_on - dt.timedelta(seconds=float(info["ttl"])),
            expires_on=expires_on,
            ran_last_pass=bool(row["ran_last_pass"]),
        )
