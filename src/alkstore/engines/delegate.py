"""An engine made of a description plus a built-in engine it delegates to.

A plug-in engine for a PostgreSQL-compatible server rarely needs SQL of its own: it
describes the server (:class:`~alkstore.core.description.EngineDescription`) and lets the
postgres engine build every plan for that description, overriding the few operations that
differ. It satisfies :class:`~alkstore.core.contracts.Engine` without subclassing the
postgres engine, whose internals stay free to change.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..core.contracts import TestHooks
from ..core.counters import Counters
from ..core.description import EngineDescription, ServerInfo
from ..core.flows import FlowStep
from ..core.options import PLAIN_FETCH, FetchOptions, JobOptions, NewJob, QueueOptions
from ..core.plans import Plan
from ..core.queries import JobPage, JobQuery, JobSearch, JobSelector
from ..core.records import Handoff, Job, Queue, QueueStats, WorkerProcess
from ..core.schedules import Schedule, ScheduleSpec
from ..core.states import JobState
from ..core.targets import Targets
from ..core.validation import check_engine_options
from .postgres import PostgresEngine


class DelegatingEngine:
    """Every operation is :attr:`inner`'s, built for this class's description.

    Subclasses set :attr:`description` (and :attr:`inner_class` when they build on another
    built-in engine) and override only the operations that differ.
    """

    description: ClassVar[EngineDescription]
    inner_class: ClassVar[type[PostgresEngine]] = PostgresEngine
    """The engine that builds the plans."""
    option_names: ClassVar[frozenset[str]] = frozenset()
    session_setup: ClassVar[tuple[str, ...]] = PostgresEngine.session_setup
    """The inner engine's (set it too when :attr:`inner_class` changes)."""

    def __init__(self, inner: PostgresEngine) -> None:
        self.inner = inner
        self.name = inner.name
        self.schema = inner.schema
        self.emulated = inner.emulated
        self.capabilities = inner.capabilities

    @classmethod
    def configure(
        cls,
        schema: str,
        options: Mapping[str, Any],
        *,
        emulated: bool = False,
        server: ServerInfo | None = None,
    ) -> DelegatingEngine:
        """The engine on ``schema``; ``options`` must be among :attr:`option_names`."""
        check_engine_options(cls.option_names, options)
        described = cls.description
        return cls(cls.inner_class(schema, emulated=emulated, server=server, description=described))

    def migrate(self) -> list[Plan[Any]]:
        """See :meth:`alkstore.core.contracts.Engine.migrate`."""
        return self.inner.migrate()

    def schema_version(self) -> Plan[int | None]:
        """See :meth:`alkstore.core.contracts.Engine.schema_version`."""
        return self.inner.schema_version()

    def check_version(self) -> Plan[int | None]:
        """See :meth:`alkstore.core.contracts.Engine.check_version`."""
        return self.inner.check_version()

    def create_queue(self, name: str, options: QueueOptions) -> Plan[None]:
        """See :meth:`alkstore.core.contracts.Engine.create_queue`."""
        return self.inner.create_queue(name, options)

    def update_queue(self, name: str, changes: dict[str, Any]) -> Plan[Queue]:
        """See :meth:`alkstore.core.contracts.Engine.update_queue`."""
        return self.inner.update_queue(name, changes)

    def delete_queue(self, name: str) -> Plan[None]:
        """See :meth:`alkstore.core.contracts.Engine.delete_queue`."""
        return self.inner.delete_queue(name)

    def get_queue(self, name: str) -> Plan[Queue | None]:
        """See :meth:`alkstore.core.contracts.Engine.get_queue`."""
        return self.inner.get_queue(name)

    def queues(self) -> Plan[list[Queue]]:
        """See :meth:`alkstore.core.contracts.Engine.queues`."""
        return self.inner.queues()

    def queue_stats(self, name: str) -> Plan[QueueStats]:
        """See :meth:`alkstore.core.contracts.Engine.queue_stats`."""
        return self.inner.queue_stats(name)

    def send(self, queue: str, jobs: Sequence[NewJob]) -> Plan[list[uuid.UUID | None]]:
        """See :meth:`alkstore.core.contracts.Engine.send`."""
        return self.inner.send(queue, jobs)

    def fetch(
        self, queue: str, batch_size: int, options: FetchOptions = PLAIN_FETCH
    ) -> Plan[list[Job]]:
        """See :meth:`alkstore.core.contracts.Engine.fetch`."""
        return self.inner.fetch(queue, batch_size, options)

    def set_paused(self, name: str, paused: bool) -> Plan[None]:
        """See :meth:`alkstore.core.contracts.Engine.set_paused`."""
        return self.inner.set_paused(name, paused)

    def complete(
        self, queue: str, targets: Targets, output_json: str | None, include_queued: bool = False
    ) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.complete`."""
        return self.inner.complete(queue, targets, output_json, include_queued)

    def complete_and_fetch(
        self,
        queue: str,
        targets: Targets,
        output_json: str | None,
        batch_size: int,
        include_metadata: bool = True,
    ) -> Plan[Handoff] | None:
        """See :meth:`alkstore.core.contracts.Engine.complete_and_fetch`."""
        return self.inner.complete_and_fetch(
            queue, targets, output_json, batch_size, include_metadata
        )

    def fail(self, queue: str, targets: Targets, output_json: str | None) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.fail`."""
        return self.inner.fail(queue, targets, output_json)

    def snooze(self, queue: str, targets: Targets, seconds: float) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.snooze`."""
        return self.inner.snooze(queue, targets, seconds)

    def cancel(self, queue: str, targets: Targets) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.cancel`."""
        return self.inner.cancel(queue, targets)

    def resume(self, queue: str, targets: Targets) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.resume`."""
        return self.inner.resume(queue, targets)

    def retry(self, queue: str, targets: Targets) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.retry`."""
        return self.inner.retry(queue, targets)

    def touch(self, queue: str, targets: Targets) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.touch`."""
        return self.inner.touch(queue, targets)

    def delete_jobs(self, queue: str, targets: Targets) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.delete_jobs`."""
        return self.inner.delete_jobs(queue, targets)

    def get_job(self, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
        """See :meth:`alkstore.core.contracts.Engine.get_job`."""
        return self.inner.get_job(queue, job_id)

    def redrive(self, dlq: str, to: str | None, limit: int) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.redrive`."""
        return self.inner.redrive(dlq, to, limit)

    def list_jobs(
        self, queue: str, states: Sequence[JobState], limit: int, after: uuid.UUID | None
    ) -> Plan[list[Job]]:
        """See :meth:`alkstore.core.contracts.Engine.list_jobs`."""
        return self.inner.list_jobs(queue, states, limit, after)

    def search_jobs(self, queue: str, search: JobSearch) -> Plan[JobPage]:
        """See :meth:`alkstore.core.contracts.Engine.search_jobs`."""
        return self.inner.search_jobs(queue, search)

    def find_jobs(self, queue: str, query: JobQuery) -> Plan[list[Job]]:
        """See :meth:`alkstore.core.contracts.Engine.find_jobs`."""
        return self.inner.find_jobs(queue, query)

    def update_jobs(
        self, queue: str, selector: JobSelector, data_json: str | None
    ) -> Plan[list[uuid.UUID]]:
        """See :meth:`alkstore.core.contracts.Engine.update_jobs`."""
        return self.inner.update_jobs(queue, selector, data_json)

    def flow(self, steps: list[FlowStep]) -> Plan[dict[str, uuid.UUID]]:
        """See :meth:`alkstore.core.contracts.Engine.flow`."""
        return self.inner.flow(steps)

    def get_dependencies(self, queue: str, job_id: uuid.UUID) -> Plan[list[Job]]:
        """See :meth:`alkstore.core.contracts.Engine.get_dependencies`."""
        return self.inner.get_dependencies(queue, job_id)

    def get_dependents(self, queue: str, job_id: uuid.UUID) -> Plan[list[Job]]:
        """See :meth:`alkstore.core.contracts.Engine.get_dependents`."""
        return self.inner.get_dependents(queue, job_id)

    def expire(self) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.expire`."""
        return self.inner.expire()

    def expire_heartbeats(self) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.expire_heartbeats`."""
        return self.inner.expire_heartbeats()

    def remove_expired_retention(self) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.remove_expired_retention`."""
        return self.inner.remove_expired_retention()

    def delete_finished(self) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.delete_finished`."""
        return self.inner.delete_finished()

    def release_flows(self) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.Engine.release_flows`."""
        return self.inner.release_flows()

    def mark_maintained(self) -> Plan[None]:
        """See :meth:`alkstore.core.contracts.Engine.mark_maintained`."""
        return self.inner.mark_maintained()

    def test_hooks(self) -> TestHooks:
        """See :meth:`alkstore.core.contracts.Engine.test_hooks`."""
        return self.inner.test_hooks()

    # schedules and pub/sub (alkstore.core.contracts.MessagingPlans)
    def put_schedule(self, spec: ScheduleSpec) -> Plan[None]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.put_schedule`."""
        return self.inner.put_schedule(spec)

    def remove_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.remove_schedule`."""
        return self.inner.remove_schedule(name, key)

    def list_schedules(self) -> Plan[list[Schedule]]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.list_schedules`."""
        return self.inner.list_schedules()

    def fire_schedules(self, now: dt.datetime | None) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.fire_schedules`."""
        return self.inner.fire_schedules(now)

    def pause_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.pause_schedule`."""
        return self.inner.pause_schedule(name, key)

    def resume_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.resume_schedule`."""
        return self.inner.resume_schedule(name, key)

    def trigger_schedule(self, name: str, key: str) -> Plan[uuid.UUID | None]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.trigger_schedule`."""
        return self.inner.trigger_schedule(name, key)

    def subscribe_queue(self, event: str, queue: str) -> Plan[None]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.subscribe_queue`."""
        return self.inner.subscribe_queue(event, queue)

    def unsubscribe_queue(self, event: str, queue: str) -> Plan[bool]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.unsubscribe_queue`."""
        return self.inner.unsubscribe_queue(event, queue)

    def publish_event(
        self, event: str, data_json: str | None, options: JobOptions
    ) -> Plan[list[tuple[str, uuid.UUID]]]:
        """See :meth:`alkstore.core.contracts.MessagingPlans.publish_event`."""
        return self.inner.publish_event(event, data_json, options)

    # the operator's plans (alkstore.core.contracts.OperatorPlans)
    def purge_batch(self, queue: str, states: frozenset[JobState], batch_size: int) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.OperatorPlans.purge_batch`."""
        return self.inner.purge_batch(queue, states, batch_size)

    def record_process(self, owner: str, ttl: float, info_json: str) -> Plan[None]:
        """See :meth:`alkstore.core.contracts.OperatorPlans.record_process`."""
        return self.inner.record_process(owner, ttl, info_json)

    def forget_process(self, owner: str) -> Plan[None]:
        """See :meth:`alkstore.core.contracts.OperatorPlans.forget_process`."""
        return self.inner.forget_process(owner)

    def list_processes(self) -> Plan[list[WorkerProcess]]:
        """See :meth:`alkstore.core.contracts.OperatorPlans.list_processes`."""
        return self.inner.list_processes()

    # store.wait's notified reads (alkstore.core.contracts.ResultWatch)
    def result_channel(self) -> str:
        """See :meth:`alkstore.core.contracts.ResultWatch.result_channel`."""
        return self.inner.result_channel()

    def watch_result(self, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
        """See :meth:`alkstore.core.contracts.ResultWatch.watch_result`."""
        return self.inner.watch_result(queue, job_id)

    # per-queue counters (alkstore.core.contracts.CounterPlans)
    def counter_horizon(self) -> Plan[dt.datetime]:
        """See :meth:`alkstore.core.contracts.CounterPlans.counter_horizon`."""
        return self.inner.counter_horizon()

    def tally_counters(self, until: dt.datetime, every: float) -> Plan[int]:
        """See :meth:`alkstore.core.contracts.CounterPlans.tally_counters`."""
        return self.inner.tally_counters(until, every)

    def read_counters(self) -> Plan[Counters]:
        """See :meth:`alkstore.core.contracts.CounterPlans.read_counters`."""
        return self.inner.read_counters()
