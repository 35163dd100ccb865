"""The in-memory engine: every operation a plan that runs the reference model, no SQL.

A plan of this engine yields no statement: its steps act on the model of its schema (under
the database's lock) and return the result, so the store's runners, the operations' argument
checks and result mapping, and the worker runtime are the same code as on a server
(docs/engines.md, "The in-memory engine"). Time is the wall clock, read once per operation;
the conformance suite's ``advance`` shifts the stored timestamps back, as on a server.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import attrs

from ...core.capabilities import Capabilities
from ...core.description import EngineDescription, Gap, ServerInfo
from ...core.errors import InvalidOptions, QueueNotFound, SchemaVersionError, UnsupportedByEngine
from ...core.flows import FlowStep
from ...core.ids import new_id
from ...core.lean import lean_jobs
from ...core.model import Model, ModelJob
from ...core.options import PLAIN_FETCH, FetchOptions, NewJob, QueueOptions
from ...core.plans import Isolation, Plan, Steps
from ...core.queries import JobPage, JobQuery, JobSearch, JobSelector
from ...core.records import Handoff, Job, Queue, QueueStats, WorkerProcess
from ...core.states import JobState
from ...core.targets import Targets
from .database import VERSION, MemoryDatabase, MemorySchema, attach, steps_of
from .hooks import MemoryTestHooks
from .messaging import MemoryMessaging

T = TypeVar("T")

NO_SQL = "the in-memory engine keeps the reference model in this process: there is no SQL"

MEMORY = EngineDescription(
    name="memory",
    summary="In this process, in memory (the reference model of alkstore.core): for unit tests",
    gaps={
        "listen_notify": Gap(
            why="no server to LISTEN on: a store's own sends wake its workers in-process, "
            "other stores' workers poll",
            no_rule_reason=NO_SQL,
        ),
        "table_partitioning": Gap(
            why="no tables: a queue's jobs are one dictionary", no_rule_reason=NO_SQL
        ),
        "plpgsql": Gap(why="no SQL functions", no_rule_reason=NO_SQL),
    },
)


def _known(model: Model, queue: str) -> str:
    """``queue``, refused with QueueNotFound when it does not exist."""
    if queue not in model.queues:
        raise QueueNotFound(queue)
    return queue


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class MemoryEngine(MemoryMessaging):
    """The engine of ``memory://``: :class:`~alkstore.core.model.Model` per schema."""

    description: ClassVar[EngineDescription] = MEMORY
    session_setup: ClassVar[tuple[str, ...]] = ()
    option_names: ClassVar[frozenset[str]] = frozenset({"database"})
    caller_transactions: ClassVar[bool] = False
    """No transaction of the caller's can be joined (``using(conn)``, transactional
    workers): the engine has no connections."""

    def __init__(self, database: MemoryDatabase, schema: str) -> None:
        super().__init__(database, schema)
        self.name = MEMORY.name
        self.emulated = False
        self.capabilities: Capabilities = MEMORY.capabilities
        self.isolation: Isolation | None = None

    @classmethod
    def configure(
        cls,
        schema: str,
        options: Mapping[str, Any],
        *,
        emulated: bool = False,
        server: ServerInfo | None = None,
    ) -> MemoryEngine:
        """The engine of ``schema`` in the database ``options["database"]`` (a
        :class:`MemoryDatabase`; default: a new anonymous one)."""
        unknown = sorted(set(options) - cls.option_names)
        if unknown:
            raise InvalidOptions("engine_options", unknown[0], "the memory engine takes database")
        if emulated:
            raise InvalidOptions("emulate", True, "engine 'memory' has no emulated mode")
        database = options.get("database")
        if database is None:
            database = attach(None)
        if not isinstance(database, MemoryDatabase):
            raise InvalidOptions("database", database, "must be a MemoryDatabase")
        return cls(database, schema)

    # -- plumbing ----------------------------------------------------------------------------

    def _jobs(self, name: str, action: Callable[[Model], list[ModelJob]]) -> Plan[list[Job]]:
        return self._model(name, lambda m: [job.to_job() for job in action(m)])

    def _queue(self, schema: MemorySchema, name: str) -> Queue | None:
        options = schema.model.queues.get(name)
        if options is None:
            return None
        created, updated = schema.queue_times[name]
        return Queue(name, options, created, updated, name in schema.model.paused)

    # -- schema ------------------------------------------------------------------------------

    def migrate(self) -> list[Plan[Any]]:
        """One plan: install the schema (nothing to upgrade yet); returns the version."""

        def install() -> int:
            with self.database.lock:
                found = self.database.install(self.schema)
                if found.version > VERSION:
                    self.database.schema(self.schema)  # raises SchemaVersionError
                return found.version

        return [Plan("migrate", lambda: steps_of(install))]

    def schema_version(self) -> Plan[int | None]:
        """The installed version, None when the schema is not installed."""

        def version() -> int | None:
            found = self.database.schemas.get(self.schema)
            return None if found is None else found.version

        return Plan("schema_version", lambda: steps_of(version))

    def check_version(self) -> Plan[int | None]:
        """Like :meth:`schema_version`, refusing a version newer than the library."""

        def check() -> int | None:
            found = self.database.schemas.get(self.schema)
            if found is not None and found.version > VERSION:
                raise SchemaVersionError(
                    f"schema {self.schema!r} is at version {found.version}, newer than this "
                    f"library's {VERSION}"
                )
            return None if found is None else found.version

        return Plan("check_version", lambda: steps_of(check))

    # -- queues ------------------------------------------------------------------------------

    def create_queue(self, name: str, options: QueueOptions) -> Plan[None]:
        """Create a queue (no partitions: ``partition=True`` is refused)."""
        if options.partition:
            raise UnsupportedByEngine(self.name, "table_partitioning", "partition=True")

        def create(schema: MemorySchema) -> None:
            schema.model.create_queue(name, options)
            moment = schema.model.now
            schema.queue_times[name] = (moment, moment)

        return self._plan("create_queue", create)

    def update_queue(self, name: str, changes: dict[str, Any]) -> Plan[Queue]:
        """Change a queue's settings; returns the queue."""

        def update(schema: MemorySchema) -> Queue:
            schema.model.update_queue(name, changes)
            created, _updated = schema.queue_times[name]
            schema.queue_times[name] = (created, schema.model.now)
            found = self._queue(schema, name)
            assert found is not None
            return found

        return self._plan("update_queue", update)

    def delete_queue(self, name: str) -> Plan[None]:
        """Delete a queue and its jobs."""

        def delete(schema: MemorySchema) -> None:
            schema.model.delete_queue(name)
            schema.model.paused.discard(name)
            del schema.queue_times[name]
            self.forget_queue(schema, name)

        return self._plan("delete_queue", delete)

    def get_queue(self, name: str) -> Plan[Queue | None]:
        """One queue, or None."""
        return self._plan("get_queue", lambda schema: self._queue(schema, name))

    def queues(self) -> Plan[list[Queue]]:
        """Every queue, by name."""

        def listed(schema: MemorySchema) -> list[Queue]:
            found = [self._queue(schema, name) for name in sorted(schema.model.queues)]
            return [queue for queue in found if queue is not None]

        return self._plan("queues", listed)

    def queue_stats(self, name: str) -> Plan[QueueStats]:
        """Counts per state and the wait of the oldest due job."""
        return self._model("queue_stats", lambda m: m.queue_stats(name))

    # -- jobs --------------------------------------------------------------------------------

    def send(self, queue: str, jobs: Sequence[NewJob]) -> Plan[list[uuid.UUID | None]]:
        """Insert jobs atomically; None for each a policy or throttle refused."""
        batch = [(job.id, _loads(job.data_json), job.options) for job in jobs]
        return self._model("send", lambda m: m.send_many(queue, batch))

    def fetch(
        self, queue: str, batch_size: int, options: FetchOptions = PLAIN_FETCH
    ) -> Plan[list[Job]]:
        """Claim up to ``batch_size`` due jobs, in fetch order."""

        def claim(m: Model) -> list[ModelJob]:
            ids = m.fetch(
                queue,
                batch_size,
                options.group_concurrency,
                ignore_start_after=options.ignore_start_after,
            )
            return [m.jobs[(queue, job_id)] for job_id in ids]

        jobs = self._jobs("fetch", claim)
        if options.include_metadata:
            return jobs

        def lean() -> Steps[list[Job]]:
            return lean_jobs((yield from jobs.steps()))

        return Plan("fetch", lean)

    def set_paused(self, name: str, paused: bool) -> Plan[None]:
        """Pause or resume fetching from a queue."""
        return self._model(
            "set_paused", lambda m: m.pause_queue(name) if paused else m.resume_queue(name)
        )

    def complete(
        self, queue: str, targets: Targets, output_json: str | None, include_queued: bool = False
    ) -> Plan[int]:
        """active (with ``include_queued`` also queued) -> completed."""
        output = _loads(output_json)
        return self._model("complete", lambda m: m.complete(queue, targets, output, include_queued))

    def complete_and_fetch(
        self,
        queue: str,
        targets: Targets,
        output_json: str | None,
        batch_size: int,
        include_metadata: bool = True,
    ) -> Plan[Handoff]:
        """``complete`` then ``fetch``, atomically."""
        done = self.complete(queue, targets, output_json)
        more = self.fetch(queue, batch_size, FetchOptions(include_metadata=include_metadata))

        def both() -> Steps[Handoff]:
            completed = yield from done.steps()
            return Handoff(completed, (yield from more.steps()))

        return Plan("complete_and_fetch", both)

    def fail(self, queue: str, targets: Targets, output_json: str | None) -> Plan[int]:
        """queued or active -> retry or failed (+ dead letter)."""
        output = _loads(output_json)
        return self._model("fail", lambda m: m.fail(queue, targets, output))

    def snooze(self, queue: str, targets: Targets, seconds: float) -> Plan[int]:
        """active -> retry after ``seconds``, without spending an attempt."""
        return self._model("snooze", lambda m: m.snooze(queue, targets, seconds))

    def cancel(self, queue: str, targets: Targets) -> Plan[int]:
        """queued or active -> cancelled."""
        return self._model("cancel", lambda m: m.cancel(queue, targets))

    def resume(self, queue: str, targets: Targets) -> Plan[int]:
        """cancelled -> created."""
        return self._model("resume", lambda m: m.resume(queue, targets))

    def retry(self, queue: str, targets: Targets) -> Plan[int]:
        """failed -> retry."""
        return self._model("retry", lambda m: m.retry(queue, targets))

    def touch(self, queue: str, targets: Targets) -> Plan[int]:
        """Heartbeat active jobs."""
        return self._model("touch", lambda m: m.touch(queue, targets))

    def delete_jobs(self, queue: str, targets: Targets) -> Plan[int]:
        """Delete jobs in any state."""
        return self._model("delete_jobs", lambda m: m.delete_jobs(queue, targets))

    def purge_batch(self, queue: str, states: frozenset[JobState], batch_size: int) -> Plan[int]:
        """Delete at most ``batch_size`` jobs of ``queue`` in ``states``; how many."""

        def purge(m: Model) -> int:
            if queue not in m.queues:
                raise QueueNotFound(queue)
            doomed = [j.id for j in m.jobs.values() if j.queue == queue and j.state in states]
            return m.delete_jobs(queue, doomed[:batch_size])

        return self._model("purge_batch", purge)

    def get_job(self, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
        """One job, or None."""

        def get(m: Model) -> Job | None:
            found = m.get_job(queue, job_id)
            return None if found is None else found.to_job()

        return self._model("get_job", get)

    def redrive(self, dlq: str, to: str | None, limit: int) -> Plan[int]:
        """Move queued dead letters back as fresh jobs."""
        return self._model("redrive", lambda m: m.redrive(dlq, to, limit, new_id))

    def list_jobs(
        self, queue: str, states: Sequence[JobState], limit: int, after: uuid.UUID | None
    ) -> Plan[list[Job]]:
        """Up to ``limit`` jobs of ``queue`` in ``states``, ids after ``after``, by id."""
        return self._jobs("list_jobs", lambda m: m.list_jobs(queue, states, limit, after))

    def search_jobs(self, queue: str, search: JobSearch) -> Plan[JobPage]:
        """A page of ``queue``'s jobs matching ``search``, looking at no more than
        ``search.scan`` jobs after ``search.after`` (as on a server: the text filter is a
        case-insensitive substring of the data's JSON text)."""

        def page(m: Model) -> JobPage:
            window = m.list_jobs(queue, (), search.scan, search.after)
            end = window[-1].id if len(window) == search.scan else None
            wanted = frozenset(search.states) or frozenset(JobState)
            text = search.text.lower() if search.text is not None else None
            found = [
                job.to_job()
                for job in window
                if job.state in wanted
                and (search.key is None or job.singleton_key == search.key)
                and (text is None or text in _json_text(job.data).lower())
            ]
            if len(found) > search.limit:
                found = found[: search.limit]
                return JobPage(found, found[-1].id)
            return JobPage(found, end)

        return self._model("search_jobs", page)

    def find_jobs(self, queue: str, query: JobQuery) -> Plan[list[Job]]:
        """The jobs of ``queue`` matching ``query``, oldest first."""
        data = _loads(query.data_json)
        return self._jobs(
            "find_jobs",
            lambda m: m.find_jobs(
                queue, id=query.id, key=query.key, data=data, queued=query.queued
            ),
        )

    def update_jobs(
        self, queue: str, selector: JobSelector, data_json: str | None
    ) -> Plan[list[uuid.UUID]]:
        """Replace the data of the queued jobs ``selector`` picks; their ids, newest first."""
        data = _loads(data_json)
        return self._model(
            "update_jobs",
            lambda m: m.update_jobs(
                queue,
                data,
                id=selector.id,
                singleton_key=selector.singleton_key,
                match=selector.match.value,
            ),
        )

    # -- flows -------------------------------------------------------------------------------

    def flow(self, steps: list[FlowStep]) -> Plan[dict[str, uuid.UUID]]:
        """Send a flow's jobs and record their dependencies atomically; ref -> id."""
        specs = []
        for step in steps:
            options = {
                k: v
                for k, v in attrs.asdict(step.job.options, recurse=False).items()
                if v is not None and k != "id"
            }
            specs.append(
                {
                    **options,
                    "ref": step.ref,
                    "queue": step.queue,
                    "data": _loads(step.job.data_json),
                    "depends_on": list(step.depends_on),
                    "id": step.job.id,
                }
            )
        return self._model("flow", lambda m: m.flow(specs))

    def get_dependencies(self, queue: str, job_id: uuid.UUID) -> Plan[list[Job]]:
        """The jobs a job waits (or waited) for."""
        return self._jobs(
            "get_dependencies", lambda m: m.get_dependencies(_known(m, queue), job_id)
        )

    def get_dependents(self, queue: str, job_id: uuid.UUID) -> Plan[list[Job]]:
        """The jobs that wait (or waited) for a job."""
        return self._jobs("get_dependents", lambda m: m.get_dependents(_known(m, queue), job_id))

    # -- maintenance -------------------------------------------------------------------------

    def expire(self) -> Plan[int]:
        """Fail jobs past their expiry."""
        return self._model("expire", Model.expire)

    def expire_heartbeats(self) -> Plan[int]:
        """Fail jobs whose heartbeat timed out."""
        return self._model("expire_heartbeats", Model.expire_heartbeats)

    def remove_expired_retention(self) -> Plan[int]:
        """Delete queued jobs past ``keep_until``."""
        return self._model("remove_expired_retention", Model.remove_expired_retention)

    def delete_finished(self) -> Plan[int]:
        """Delete finished jobs past their deletion time."""
        return self._model("delete_finished", Model.delete_finished)

    def release_flows(self) -> Plan[int]:
        """Nothing to release: the model releases a flow job with its last parent's
        completion, in the same operation."""
        return self._model("release_flows", lambda _m: 0)

    def mark_maintained(self) -> Plan[None]:
        """Nothing to record: no process but this one sees the database."""
        return self._model("mark_maintained", lambda _m: None)

    # -- the worker runtime ------------------------------------------------------------------

    def claim_pass(self, interval: float, owner: str) -> Plan[bool]:
        """Claim the next maintenance pass: True for one caller per ``interval`` seconds."""

        def claim(schema: MemorySchema) -> bool:
            moment = schema.model.now
            if schema.next_pass is not None and schema.next_pass > moment:
                return False
            schema.next_pass = moment + dt.timedelta(seconds=interval)
            schema.pass_owner = owner
            return True

        return self._plan("claim_pass", claim)

    def record_process(self, owner: str, ttl: float, info_json: str) -> Plan[None]:
        """Create or refresh the record of ``owner``, expiring in ``ttl`` seconds (and drop
        the expired ones)."""

        def record(schema: MemorySchema) -> None:
            moment = schema.model.now
            alive = {k: p for k, p in schema.processes.items() if p.expires_on >= moment}
            info = json.loads(info_json)
            found = alive.get(owner)
            alive[owner] = WorkerProcess(
                owner=owner,
                host=info["host"],
                pid=int(info["pid"]),
                queues=tuple(info["queues"]),
                workers=int(info["workers"]),
                started_on=moment if found is None else found.started_on,
                seen_on=moment,
                expires_on=moment + dt.timedelta(seconds=ttl),
                ran_last_pass=False,
            )
            schema.processes = alive

        return self._plan("record_process", record)

    def forget_process(self, owner: str) -> Plan[None]:
        """Delete the record of ``owner``."""

        def forget(schema: MemorySchema) -> None:
            schema.processes.pop(owner, None)

        return self._plan("forget_process", forget)

    def list_processes(self) -> Plan[list[WorkerProcess]]:
        """The unexpired records, by owner."""

        def listed(schema: MemorySchema) -> list[WorkerProcess]:
            moment = schema.model.now
            return [
                attrs.evolve(p, ran_last_pass=p.owner == schema.pass_owner)
                for _owner, p in sorted(schema.processes.items())
                if p.expires_on > moment
            ]

        return self._plan("worker_processes", listed)

    def watch(self, queue: str, targets: Targets) -> Plan[set[uuid.UUID]]:
        """Heartbeat the running jobs that have ``heartbeat_seconds``; the ids of those still
        active in the attempt they were fetched in."""

        def watched(m: Model) -> set[uuid.UUID]:
            m.touch(queue, targets)
            alive = set()
            for job_id, retry_count in zip(targets.ids, targets.retry_counts, strict=True):
                job = m.get_job(queue, job_id)
                if job is None or job.state is not JobState.ACTIVE:
                    continue
                if retry_count is None or job.retry_count == retry_count:
                    alive.add(job_id)
            return alive

        return self._model("watch", watched)

    def test_hooks(self) -> MemoryTestHooks:
        """The plans the conformance suite uses to set up and read state."""
        return MemoryTestHooks(self)


__all__ = ["MEMORY", "MemoryEngine"]


def _json_text(data: Any) -> str:
    """``data`` as JSON text the way PostgreSQL prints jsonb (``", "`` and ``": "``)."""
    return json.dumps(data, ensure_ascii=False, separators=(", ", ": "))
