"""The engine contract: what the store, the registry and the conformance suite rely on.

An engine is any class with the members of :class:`Engine`; it need not subclass anything
alkstore ships (a plug-in may delegate to a built-in engine instead). The registry checks a
class structurally with :func:`missing_members` and names what is missing.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from .capabilities import Capabilities
from .counters import Counters
from .description import EngineDescription, ServerInfo
from .errors import UnsupportedByEngine
from .flows import FlowStep
from .options import PLAIN_FETCH, FetchOptions, JobOptions, NewJob, QueueOptions
from .plans import Isolation, Plan, Row
from .queries import JobPage, JobQuery, JobSearch, JobSelector
from .records import Handoff, Job, Queue, QueueStats, WorkerProcess
from .schedules import Schedule, ScheduleSpec
from .states import JobState
from .targets import Targets


@runtime_checkable
class TestHooks(Protocol):
    """Plans only the conformance suite runs: it reaches the database through nothing else."""

    def advance(self, seconds: float) -> Plan[None]:
        """Let ``seconds`` pass for every job of the schema (a controllable clock)."""
        ...

    def job_rows(self) -> Plan[list[Row]]:
        """Every job as a row: the ``Job`` fields plus ``source_id``, each timestamp as its
        age in seconds on the server's clock (``data`` and ``output`` as JSON text)."""
        ...

    def job_count(self) -> Plan[int]:
        """How many jobs the schema holds, in every queue and state."""
        ...

    def set_job_columns(
        self, queue: str, job_id: uuid.UUID, values: Mapping[str, int | bool | dt.datetime | None]
    ) -> Plan[int]:
        """Store ``values`` (column or field name -> value) in one job as they are, skipping
        validation: a row as an older version stored it. How many jobs changed (0 or 1)."""
        ...

    def reset(self) -> Plan[None]:
        """Delete every job and queue (the schema stays installed)."""
        ...

    def drop(self) -> Plan[None]:
        """Remove everything the engine installed."""
        ...

    def version_records(self) -> Plan[int]:
        """How many schema-version records exist (one once installed)."""
        ...

    def set_version(self, version: int) -> Plan[None]:
        """Record ``version`` as the installed schema version."""
        ...

    def job_storage(self) -> Plan[dict[str, int]]:
        """Each table (or partition) that holds jobs -> how many it holds now."""
        ...


@runtime_checkable
class Engine(Protocol):
    """One database's SQL for every operation, as plans (see ``docs/writing-an-engine.md``)."""

    description: ClassVar[EngineDescription]
    """What this engine is: gaps, isolation, guard profile, detection."""
    session_setup: ClassVar[tuple[str, ...]]
    """Statements run on every connection the store opens (never on a caller's)."""
    option_names: ClassVar[frozenset[str]]
    """The ``engine_options`` keys :meth:`configure` accepts."""

    name: str
    schema: str
    emulated: bool
    capabilities: Capabilities
    """The effective capabilities on the server the store reached."""

    @classmethod
    def configure(
        cls,
        schema: str,
        options: Mapping[str, Any],
        *,
        emulated: bool = False,
        server: ServerInfo | None = None,
    ) -> Engine:
        """The engine for ``schema`` with ``engine_options`` applied, on ``server`` (None:
        unknown or emulated). Refuses an unknown or invalid option with ``InvalidOptions``."""
        ...

    # schema
    def migrate(self) -> list[Plan[Any]]:
        """Plans that install or upgrade the schema, in order; the last returns the version."""
        ...

    def schema_version(self) -> Plan[int | None]:
        """The installed schema version, None when nothing is installed."""
        ...

    def check_version(self) -> Plan[int | None]:
        """Like :meth:`schema_version`, refusing a schema newer than the library."""
        ...

    # queues
    def create_queue(self, name: str, options: QueueOptions) -> Plan[None]:
        """Create a queue."""
        ...

    def update_queue(self, name: str, changes: dict[str, Any]) -> Plan[Queue]:
        """Change a queue's settings; returns the new queue."""
        ...

    def delete_queue(self, name: str) -> Plan[None]:
        """Delete a queue and its jobs."""
        ...

    def get_queue(self, name: str) -> Plan[Queue | None]:
        """One queue, or None."""
        ...

    def queues(self) -> Plan[list[Queue]]:
        """Every queue, by name."""
        ...

    def queue_stats(self, name: str) -> Plan[QueueStats]:
        """Counts per state and the oldest wait."""
        ...

    # jobs
    def send(self, queue: str, jobs: Sequence[NewJob]) -> Plan[list[uuid.UUID | None]]:
        """Insert jobs (ids assigned) atomically; None for each a policy or throttle refused."""
        ...

    def fetch(
        self, queue: str, batch_size: int, options: FetchOptions = PLAIN_FETCH
    ) -> Plan[list[Job]]:
        """Claim up to ``batch_size`` due jobs, in fetch order."""
        ...

    def set_paused(self, name: str, paused: bool) -> Plan[None]:
        """Pause or resume fetching from a queue."""
        ...

    def complete(
        self, queue: str, targets: Targets, output_json: str | None, include_queued: bool = False
    ) -> Plan[int]:
        """active (with ``include_queued`` also queued) -> completed."""
        ...

    def complete_and_fetch(
        self,
        queue: str,
        targets: Targets,
        output_json: str | None,
        batch_size: int,
        include_metadata: bool = True,
    ) -> Plan[Handoff] | None:
        """``complete`` then ``fetch`` as one plan, or None (the store runs the two); the
        claimed jobs lean without ``include_metadata`` (see ``FetchOptions``)."""
        ...

    def fail(self, queue: str, targets: Targets, output_json: str | None) -> Plan[int]:
        """queued or active -> retry or failed (+ dead letter)."""
        ...

    def snooze(self, queue: str, targets: Targets, seconds: float) -> Plan[int]:
        """active -> retry, due ``seconds`` (validated) from now, without spending an attempt
        (``retry_limit`` + 1); a stately job whose key's retry slot is taken stays active."""
        ...

    def cancel(self, queue: str, targets: Targets) -> Plan[int]:
        """queued or active -> cancelled."""
        ...

    def resume(self, queue: str, targets: Targets) -> Plan[int]:
        """cancelled -> created."""
        ...

    def retry(self, queue: str, targets: Targets) -> Plan[int]:
        """failed -> retry."""
        ...

    def touch(self, queue: str, targets: Targets) -> Plan[int]:
        """Heartbeat active jobs."""
        ...

    def delete_jobs(self, queue: str, targets: Targets) -> Plan[int]:
        """Delete jobs in any state."""
        ...

    def get_job(self, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
        """One job, or None."""
        ...

    def redrive(self, dlq: str, to: str | None, limit: int) -> Plan[int]:
        """Move dead letters back as fresh jobs."""
        ...

    # listing
    def list_jobs(
        self, queue: str, states: Sequence[JobState], limit: int, after: uuid.UUID | None
    ) -> Plan[list[Job]]:
        """Up to ``limit`` jobs of ``queue`` in ``states`` (all when empty), ids after
        ``after``, in id order (read-only; keyset pages)."""
        ...

    def search_jobs(self, queue: str, search: JobSearch) -> Plan[JobPage]:
        """A page of ``queue``'s jobs matching ``search`` (state, key, text in data), looking
        at no more than ``search.scan`` jobs (read-only; keyset pages)."""
        ...

    # finding and editing jobs
    def find_jobs(self, queue: str, query: JobQuery) -> Plan[list[Job]]:
        """The jobs of ``queue`` matching ``query``, oldest first."""
        ...

    def update_jobs(
        self, queue: str, selector: JobSelector, data_json: str | None
    ) -> Plan[list[uuid.UUID]]:
        """Replace the data of the queued jobs ``selector`` picks; their ids, newest first."""
        ...

    # flows
    def flow(self, steps: list[FlowStep]) -> Plan[dict[str, uuid.UUID]]:
        """Send a flow's jobs and record their dependencies atomically; ref -> id."""
        ...

    def get_dependencies(self, queue: str, job_id: uuid.UUID) -> Plan[list[Job]]:
        """The jobs a job waits (or waited) for."""
        ...

    def get_dependents(self, queue: str, job_id: uuid.UUID) -> Plan[list[Job]]:
        """The jobs that wait (or waited) for a job."""
        ...

    # maintenance
    def expire(self) -> Plan[int]:
        """Fail jobs past their expiry."""
        ...

    def expire_heartbeats(self) -> Plan[int]:
        """Fail jobs whose heartbeat timed out."""
        ...

    def remove_expired_retention(self) -> Plan[int]:
        """Delete queued jobs past ``keep_until``."""
        ...

    def delete_finished(self) -> Plan[int]:
        """Delete finished jobs past their deletion time."""
        ...

    def release_flows(self) -> Plan[int]:
        """Release flow jobs left parked after their last parent completed."""
        ...

    def mark_maintained(self) -> Plan[None]:
        """Record that maintenance ran."""
        ...

    def test_hooks(self) -> TestHooks:
        """The plans the conformance suite uses to set up and read state."""
        ...


@runtime_checkable
class OwnRuntime(Protocol):
    """An engine that builds the worker runtime's plans itself instead of running the postgres
    family's SQL for them (the in-memory engine). Optional: the runtime checks for it."""

    isolation: Isolation | None
    """Isolation of a transactional worker's transaction."""

    def claim_pass(self, interval: float, owner: str) -> Plan[bool]:
        """Claim the next maintenance pass: True for one caller per ``interval`` seconds."""
        ...

    def watch(self, queue: str, targets: Targets) -> Plan[set[uuid.UUID]]:
        """Heartbeat the running jobs that have ``heartbeat_seconds``; the ids of those still
        active in the attempt they were fetched in."""
        ...


@runtime_checkable
class MessagingPlans(Protocol):
    """The plans of cron schedules and pub/sub (:mod:`alkstore.messaging` checks the
    arguments, then asks the engine for these): optional, so an engine without them still
    serves every other operation, and :func:`messaging_plans` refuses these by name."""

    def put_schedule(self, spec: ScheduleSpec) -> Plan[None]:
        """Create or replace the schedule ``(spec.name, spec.key)``."""
        ...

    def remove_schedule(self, name: str, key: str) -> Plan[bool]:
        """Delete a schedule; True if there was one."""
        ...

    def list_schedules(self) -> Plan[list[Schedule]]:
        """Every schedule, by name and key."""
        ...

    def fire_schedules(self, now: dt.datetime | None) -> Plan[int]:
        """Send the job of every due slot; how many."""
        ...

    def pause_schedule(self, name: str, key: str) -> Plan[bool]:
        """Stop a schedule from firing; False if it was paused already
        (:class:`~.errors.ScheduleNotFound` if there is none)."""
        ...

    def resume_schedule(self, name: str, key: str) -> Plan[bool]:
        """Let a paused schedule fire again from its next slot, the slots of the pause
        counted as fired; False if it was not paused."""
        ...

    def trigger_schedule(self, name: str, key: str) -> Plan[uuid.UUID | None]:
        """Send a schedule's job now (a fresh id, its slots untouched); the id, or None
        when the queue's policy refused it."""
        ...

    def subscribe_queue(self, event: str, queue: str) -> Plan[None]:
        """Subscribe ``queue`` to ``event``."""
        ...

    def unsubscribe_queue(self, event: str, queue: str) -> Plan[bool]:
        """Remove a subscription; True if there was one."""
        ...

    def publish_event(
        self, event: str, data_json: str | None, options: JobOptions
    ) -> Plan[list[tuple[str, uuid.UUID]]]:
        """One job per subscribed queue; ``(queue, id)`` of each, by queue."""
        ...


def messaging_plans(engine: Engine) -> MessagingPlans:
    """``engine`` as the builder of schedule and pub/sub plans; an engine without them is
    refused by name."""
    if isinstance(engine, MessagingPlans):
        return engine
    raise UnsupportedByEngine(
        engine.name, "messaging", "it builds no plans for schedules and pub/sub"
    )


@runtime_checkable
class OperatorPlans(Protocol):
    """The plans of the operator's tools (``purge_jobs``' batches, the worker processes' records of
    ``alkstore workers``): optional, and :func:`operator_plans` refuses them by name."""

    def purge_batch(self, queue: str, states: frozenset[JobState], batch_size: int) -> Plan[int]:
        """Delete at most ``batch_size`` jobs of ``queue`` in ``states`` in one transaction,
        re-checking their state, and count their events (docs/dashboard.md, "Counters");
        how many (:class:`~.errors.QueueNotFound` for an unknown queue). ``purge_jobs``
        runs batches until one deletes nothing."""
        ...

    def record_process(self, owner: str, ttl: float, info_json: str) -> Plan[None]:
        """Create or refresh the record of the process ``owner`` (``info_json``: host, pid,
        queues, workers, ttl), expiring in ``ttl`` seconds; expired records go."""
        ...

    def forget_process(self, owner: str) -> Plan[None]:
        """Delete the record of the process ``owner``."""
        ...

    def list_processes(self) -> Plan[list[WorkerProcess]]:
        """The unexpired process records, by owner."""
        ...


def operator_plans(engine: Engine) -> OperatorPlans:
    """``engine`` as the builder of the operator's plans; an engine without them is refused
    by name."""
    if isinstance(engine, OperatorPlans):
        return engine
    raise UnsupportedByEngine(engine.name, "operator", "it builds no purge or process plans")


@runtime_checkable
class ResultWatch(Protocol):
    """What ``store.wait`` needs of an engine to be told when a job finishes instead of only
    reading it again: optional, and used only where the engine's capabilities have both
    ``listen_notify`` and ``row_triggers`` (docs/tasks.md, "Waiting for a result")."""

    def result_channel(self) -> str:
        """The channel the engine notifies (payload: the job id) when a job that someone
        waits for finishes."""
        ...

    def watch_result(self, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
        """The job as it is now (None: not in ``queue``), marked so that its finish is
        notified on :meth:`result_channel`."""
        ...


def result_watch(engine: Engine) -> ResultWatch | None:
    """``engine`` as the builder of ``wait``'s notified reads; None when it builds none (its
    waits then only read again)."""
    return engine if isinstance(engine, ResultWatch) else None


@runtime_checkable
class CounterPlans(Protocol):
    """The per-queue counters kept by maintenance (docs/dashboard.md, "Counters"): optional,
    so an engine without them (the in-memory one) serves every other operation, and
    ``store.counters()`` refuses them by name."""

    def counter_horizon(self) -> Plan[dt.datetime]:
        """The time before which every transaction that may write a job event has ended
        (run on its own, before :meth:`tally_counters`)."""
        ...

    def tally_counters(self, until: dt.datetime, every: float) -> Plan[int]:
        """Count the events up to ``until`` into the counters (nothing while the last count
        is less than ``every`` seconds old); how many were counted."""
        ...

    def read_counters(self) -> Plan[Counters]:
        """Every queue's counters and how far they have counted."""
        ...


def counter_plans(engine: Engine) -> CounterPlans | None:
    """``engine`` as the keeper of per-queue counters; None when it keeps none."""
    return engine if isinstance(engine, CounterPlans) else None


T = TypeVar("T")


class WorkerRuntime(Protocol):
    """What the worker runtime may ask of an engine, beyond :class:`Engine`'s operations:
    the only way ``alkstore.worker`` reaches an engine's SQL (:func:`worker_runtime`)."""

    isolation: Isolation | None
    """Isolation of a transactional worker's transaction."""

    def claim_pass(self, interval: float, owner: str) -> Plan[bool]:
        """Claim the next maintenance pass: True for one caller per ``interval`` seconds."""
        ...

    def watch(self, queue: str, targets: Targets) -> Plan[set[uuid.UUID]]:
        """Heartbeat the running jobs that have ``heartbeat_seconds``; the ids of those still
        active in the attempt they were fetched in."""
        ...

    def unflushed(self, plan: Plan[T]) -> Plan[T]:
        """``plan`` committing without waiting for its WAL flush where the engine can (an
        idle worker's claim), else ``plan`` as it is."""
        ...

    def channel(self) -> str:
        """The LISTEN/NOTIFY channel of the engine's schema (engines with
        ``listen_notify``)."""
        ...


@runtime_checkable
class ProvidesRuntime(Protocol):
    """An engine that builds its :class:`WorkerRuntime` (the postgres family)."""

    def worker_runtime(self) -> WorkerRuntime:
        """The runtime's plans of this engine."""
        ...


class _Owned:
    """The :class:`WorkerRuntime` of an :class:`OwnRuntime` engine: its plans as they are
    (no WAL to skip, no channel: such an engine has no ``listen_notify``)."""

    def __init__(self, engine: OwnRuntime) -> None:
        self.isolation = engine.isolation
        self.claim_pass = engine.claim_pass
        self.watch = engine.watch
        self._name = getattr(engine, "name", type(engine).__name__)

    def unflushed(self, plan: Plan[T]) -> Plan[T]:
        return plan

    def channel(self) -> str:
        raise UnsupportedByEngine(self._name, "listen_notify")


def worker_runtime(engine: Engine) -> WorkerRuntime:
    """The :class:`WorkerRuntime` of ``engine``: its own, the one of the engine it delegates
    to (``engine.inner``), or one made of an :class:`OwnRuntime` engine's plans; an engine
    with none is refused by name."""
    for candidate in (engine, getattr(engine, "inner", None)):
        if isinstance(candidate, ProvidesRuntime):
            return candidate.worker_runtime()
    if isinstance(engine, OwnRuntime):
        return _Owned(engine)
    raise UnsupportedByEngine(
        engine.name, "worker_runtime", "it builds no plans for the worker runtime"
    )


def missing_members(cls: type) -> list[str]:
    """The members of :class:`Engine` that ``cls`` lacks (instance attributes aside, which
    :meth:`Engine.configure` sets), or that are not of the expected kind."""
    missing = []
    for name in _class_members():
        value = getattr(cls, name, None)
        if value is None or (name != "description" and name in _METHODS and not callable(value)):
            missing.append(name)
    description = getattr(cls, "description", None)
    if description is not None and not isinstance(description, EngineDescription):
        missing.append("description (an EngineDescription)")
    return missing


_INSTANCE_ATTRIBUTES = frozenset({"name", "schema", "emulated", "capabilities"})
_METHODS = frozenset(
    n for n, v in vars(Engine).items() if callable(v) and not n.startswith("_")
) | {"configure"}


def _class_members() -> list[str]:
    annotated = [n for n in Engine.__annotations__ if n not in _INSTANCE_ATTRIBUTES]
    return sorted(set(annotated) | _METHODS)
