"""The public operations as plans: argument checks at the API edge, then the engine's plan.

Both faces (:class:`~alkstore.store.Store` and :class:`~alkstore.store.AsyncStore`) call
these builders and only differ in how they run the plan, so every check and every result
mapping here is written once.
"""

from __future__ import annotations

import functools
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from .core.attempts import snooze_seconds
from .core.contracts import Engine, operator_plans
from .core.errors import InvalidOptions, QueueNotFound, QueueOptionsDiffer
from .core.flows import build_flow
from .core.ids import new_id, new_ids
from .core.options import (
    LEAN_FETCH,
    FetchOptions,
    JobOptions,
    NewJob,
    QueueOptions,
    dump_json,
)
from .core.plans import Plan, Steps
from .core.queries import JobPage, JobQuery, JobSearch, JobSelector, Match
from .core.records import Handoff, Job, MaintenanceReport, Queue, QueueStats, WorkerProcess
from .core.states import JobState
from .core.targets import IdLike, targets
from .core.validation import INT_MAX, check_queue_name, is_int


def error_output(error: Any) -> str | None:
    """The JSON stored in ``output`` when a job fails: an exception becomes its class name,
    message and traceback (``stack``, as a worker stores a handler's exception)."""
    if isinstance(error, BaseException):
        error = {
            "name": type(error).__name__,
            "message": str(error),
            "stack": "".join(traceback.format_exception(error)),
        }
    return dump_json("error", error)


NO_OPTIONS = JobOptions()
"""Shared by every job sent without options (most of a large ``send_many``)."""


def _new_job(
    data: Any, options: Mapping[str, Any], make_id: Callable[[], uuid.UUID] = new_id
) -> NewJob:
    opts = JobOptions.from_kwargs(options) if options else NO_OPTIONS
    return NewJob.build(data, opts, make_id)


def _nothing_sent(queue: str, found: Queue | None) -> list[uuid.UUID | None]:
    """An empty ``send_many`` sends nothing, but still refuses a queue that does not exist."""
    if found is None:
        raise QueueNotFound(queue)
    return []


def _positive(field: str, value: object) -> int:
    if not is_int(value) or not 1 <= value <= INT_MAX:  # type: ignore[operator]
        raise InvalidOptions(field, value, f"must be an integer from 1 to {INT_MAX}")
    return value  # type: ignore[return-value]


def _job_states(states: Iterable[JobState | str]) -> list[JobState]:
    wanted: list[JobState] = []
    for state in [states] if isinstance(states, str) else states:
        try:
            wanted.append(JobState(state))
        except ValueError:
            known = ", ".join(JobState)
            raise InvalidOptions("states", state, f"job states are {known}") from None
    return wanted


class Operations:
    """Builds the plan of every public operation for one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # queues
    def create_queue(self, name: str, options: Mapping[str, Any]) -> Plan[None]:
        """See :meth:`alkstore.Store.create_queue`."""
        return self.engine.create_queue(check_queue_name(name), QueueOptions.from_kwargs(options))

    @staticmethod
    def queue_matches(name: str, options: Mapping[str, Any], queue: Queue | None) -> bool:
        """For ``create_queue(..., exist_ok=True)``: whether ``queue`` (as read) exists with
        exactly the requested options (defaults included); :class:`QueueOptionsDiffer`, naming
        every option that differs, when it exists with others."""
        requested = QueueOptions.from_kwargs(options)
        if queue is None:
            return False
        differences: dict[str, tuple[object, object]] = {
            field.name: (getattr(queue.options, field.name), getattr(requested, field.name))
            for field in attrs.fields(QueueOptions)
            if getattr(queue.options, field.name) != getattr(requested, field.name)
        }
        if differences:
            raise QueueOptionsDiffer(name, differences)
        return True

    def update_queue(self, name: str, changes: Mapping[str, Any]) -> Plan[Queue]:
        """See :meth:`alkstore.Store.update_queue`."""
        QueueOptions().updated(changes)  # names and value types checked before any I/O
        return self.engine.update_queue(check_queue_name(name), dict(changes))

    def delete_queue(self, name: str) -> Plan[None]:
        """See :meth:`alkstore.Store.delete_queue`."""
        return self.engine.delete_queue(check_queue_name(name))

    def get_queue(self, name: str) -> Plan[Queue | None]:
        """See :meth:`alkstore.Store.get_queue`."""
        return self.engine.get_queue(check_queue_name(name))

    def queues(self) -> Plan[list[Queue]]:
        """See :meth:`alkstore.Store.queues`."""
        return self.engine.queues()

    def queue_stats(self, name: str) -> Plan[QueueStats]:
        """See :meth:`alkstore.Store.queue_stats`."""
        return self.engine.queue_stats(check_queue_name(name))

    # jobs
    def send(self, queue: str, data: Any, options: Mapping[str, Any]) -> Plan[uuid.UUID | None]:
        """See :meth:`alkstore.Store.send`."""
        job = _new_job(data, options)
        return self._sent(check_queue_name(queue), [job]).then(lambda ids: ids[0])

    def _sent(self, queue: str, jobs: list[NewJob]) -> Plan[list[uuid.UUID | None]]:
        """The engine's ``send``; when jobs name their own dead-letter queues, first checks
        (in the same transaction) that those exist and are not ``queue``."""
        plan = self.engine.send(queue, jobs)
        named = sorted({j.options.dead_letter for j in jobs if j.options.dead_letter is not None})
        if not named:
            return plan
        if queue in named:
            raise InvalidOptions("dead_letter", queue, "may not be the job's own queue")
        lookups = [(name, self.engine.get_queue(name)) for name in named]

        def steps() -> Steps[list[uuid.UUID | None]]:
            for name, lookup in lookups:
                if (yield from lookup.steps()) is None:
                    raise QueueNotFound(name, field="dead_letter")
            return (yield from plan.steps())

        return attrs.evolve(plan, steps=steps, transaction=True)

    def send_many(
        self, queue: str, jobs: Iterable[Mapping[str, Any]]
    ) -> Plan[list[uuid.UUID | None]]:
        """See :meth:`alkstore.Store.send_many`."""
        check_queue_name(queue)
        specs = list(jobs)
        # Ids for the whole batch at once (a job naming its own id leaves one unused).
        make_id = iter(new_ids(len(specs))).__next__
        built = []
        for index, spec in enumerate(specs):
            if not isinstance(spec, Mapping):
                raise InvalidOptions(
                    f"jobs[{index}]", spec, "must be a mapping: {'data': ..., **options}"
                )
            # Most jobs of a large batch have no options: no dict to build for them.
            plain = len(spec) == 1 and "data" in spec
            options = {} if plain else {k: v for k, v in spec.items() if k != "data"}
            built.append(_new_job(spec.get("data"), options, make_id))
        if not built:
            return self.engine.get_queue(queue).then(functools.partial(_nothing_sent, queue))
        return self._sent(queue, built)

    def fetch(
        self,
        queue: str,
        batch_size: int,
        group_concurrency: Any = None,
        ignore_start_after: bool = False,
        include_metadata: bool = False,
    ) -> Plan[list[Job]]:
        """See :meth:`alkstore.Store.fetch` (lean jobs unless ``include_metadata``)."""
        name, batch = check_queue_name(queue), _positive("batch_size", batch_size)
        if group_concurrency is None and ignore_start_after is False:
            if include_metadata is True:
                return self.engine.fetch(name, batch)
            if include_metadata is False:
                return self.engine.fetch(name, batch, LEAN_FETCH)
        options = FetchOptions(
            group_concurrency=group_concurrency,
            ignore_start_after=ignore_start_after,
            include_metadata=include_metadata,
        )
        return self.engine.fetch(name, batch, options)

    def set_paused(self, name: str, paused: bool) -> Plan[None]:
        """See :meth:`alkstore.Store.pause_queue` and :meth:`alkstore.Store.resume_queue`."""
        return self.engine.set_paused(check_queue_name(name), paused)

    def complete(
        self,
        queue: str,
        ids: IdLike | Iterable[IdLike],
        output: Any,
        include_queued: bool = False,
    ) -> Plan[int]:
        """See :meth:`alkstore.Store.complete`."""
        if not isinstance(include_queued, bool):
            raise InvalidOptions("include_queued", include_queued, "must be a bool")
        return self.engine.complete(
            check_queue_name(queue), targets(ids), dump_json("output", output), include_queued
        )

    def complete_and_fetch(
        self,
        queue: str,
        ids: IdLike | Iterable[IdLike],
        output: Any,
        batch_size: int,
        group_concurrency: Any = None,
        include_metadata: bool = False,
    ) -> list[Plan[Any]]:
        """See :meth:`alkstore.Store.complete_and_fetch`: one plan, or where the engine cannot
        do both in one statement, the ``complete`` and ``fetch`` plans to run in turn."""
        name = check_queue_name(queue)
        batch = _positive("batch_size", batch_size)
        full = FetchOptions(include_metadata=include_metadata).include_metadata  # validated
        done, output_json = targets(ids), dump_json("output", output)
        if group_concurrency is None:
            both = self.engine.complete_and_fetch(name, done, output_json, batch, full)
            if both is not None:
                return [both]
        # Group limits need the keyed claim (docs/queues.md): complete, then fetch.
        return [
            self.engine.complete(name, done, output_json),
            self.fetch(name, batch, group_concurrency, include_metadata=full),
        ]

    @staticmethod
    def handoff(results: list[Any]) -> Handoff:
        """The :class:`Handoff` from the results of the plans of :meth:`complete_and_fetch`."""
        if len(results) == 1:
            handoff: Handoff = results[0]
            return handoff
        completed, jobs = results
        return Handoff(completed, jobs)

    def fail(self, queue: str, ids: IdLike | Iterable[IdLike], error: Any) -> Plan[int]:
        """See :meth:`alkstore.Store.fail`."""
        return self.engine.fail(check_queue_name(queue), targets(ids), error_output(error))

    def snooze(self, queue: str, ids: IdLike | Iterable[IdLike], seconds: Any) -> Plan[int]:
        """See :meth:`alkstore.Store.snooze`."""
        delay = snooze_seconds(seconds)
        return self.engine.snooze(check_queue_name(queue), targets(ids), delay)

    def cancel(self, queue: str, ids: IdLike | Iterable[IdLike]) -> Plan[int]:
        """See :meth:`alkstore.Store.cancel`."""
        return self.engine.cancel(check_queue_name(queue), targets(ids))

    def resume(self, queue: str, ids: IdLike | Iterable[IdLike]) -> Plan[int]:
        """See :meth:`alkstore.Store.resume`."""
        return self.engine.resume(check_queue_name(queue), targets(ids))

    def retry(self, queue: str, ids: IdLike | Iterable[IdLike]) -> Plan[int]:
        """See :meth:`alkstore.Store.retry`."""
        return self.engine.retry(check_queue_name(queue), targets(ids))

    def delete_jobs(self, queue: str, ids: IdLike | Iterable[IdLike]) -> Plan[int]:
        """See :meth:`alkstore.Store.delete_jobs`."""
        return self.engine.delete_jobs(check_queue_name(queue), targets(ids))

    def touch(self, queue: str, ids: IdLike | Iterable[IdLike]) -> Plan[int]:
        """See :meth:`alkstore.Store.touch`."""
        return self.engine.touch(check_queue_name(queue), targets(ids))

    def get_job(self, queue: str, job_id: IdLike) -> Plan[Job | None]:
        """See :meth:`alkstore.Store.get_job`."""
        (one,) = targets(job_id).ids
        return self.engine.get_job(check_queue_name(queue), one)

    def redrive(self, dlq: str, to: str | None, limit: int) -> Plan[int]:
        """See :meth:`alkstore.Store.redrive`."""
        if to is not None:
            check_queue_name(to, "to")
        return self.engine.redrive(check_queue_name(dlq, "dlq"), to, _positive("limit", limit))

    # listing
    def list_jobs(
        self,
        queue: str,
        states: Iterable[JobState | str],
        limit: int,
        after: IdLike | None,
    ) -> Plan[list[Job]]:
        """See :meth:`alkstore.Store.list_jobs`."""
        start = None if after is None else targets(after).ids[0]
        return self.engine.list_jobs(
            check_queue_name(queue), _job_states(states), _positive("limit", limit), start
        )

    def record_process(self, owner: str, ttl: float, info_json: str) -> Plan[None]:
        """The supervisor's record of its process (``alkstore workers``)."""
        return operator_plans(self.engine).record_process(owner, ttl, info_json)

    def forget_process(self, owner: str) -> Plan[None]:
        """Delete the supervisor's record of its process."""
        return operator_plans(self.engine).forget_process(owner)

    def worker_processes(self) -> Plan[list[WorkerProcess]]:
        """See :meth:`alkstore.Store.worker_processes`."""
        return operator_plans(self.engine).list_processes()

    def purge_batch(
        self, queue: str, states: Iterable[JobState | str], batch_size: int
    ) -> Plan[int]:
        """One batch of :meth:`alkstore.Store.purge_jobs`: how many it deleted."""
        wanted = frozenset(_job_states(states))
        if not wanted:  # never "every state" by omission
            raise InvalidOptions("states", states, "name at least one state to purge")
        name, size = check_queue_name(queue), _positive("batch_size", batch_size)
        return operator_plans(self.engine).purge_batch(name, wanted, size)

    def search_jobs(self, queue: str, search: JobSearch) -> Plan[JobPage]:
        """See :meth:`alkstore.Store.search_jobs`."""
        return self.engine.search_jobs(check_queue_name(queue), search)

    # finding and editing jobs
    def find_jobs(
        self, queue: str, *, id: Any, key: Any, data: Any, queued: Any
    ) -> Plan[list[Job]]:
        """See :meth:`alkstore.Store.find_jobs`."""
        query = JobQuery.build(id=id, key=key, data=data, queued=queued)
        return self.engine.find_jobs(check_queue_name(queue), query)

    def update(
        self, queue: str, data: Any, *, id: Any, singleton_key: Any, match: Any
    ) -> Plan[int]:
        """See :meth:`alkstore.Store.update`."""
        selector = JobSelector(id=id, singleton_key=singleton_key, match=match)
        plan = self.engine.update_jobs(check_queue_name(queue), selector, dump_json("data", data))
        return plan.then(len)

    def upsert(
        self,
        queue: str,
        data: Any,
        *,
        id: Any,
        singleton_key: Any,
        match: Any,
        options: Mapping[str, Any],
    ) -> Plan[uuid.UUID | None]:
        """See :meth:`alkstore.Store.upsert`: the update, and only if it changed nothing the
        send, in one transaction."""
        selector = JobSelector(id=id, singleton_key=singleton_key, match=match)
        if selector.match is Match.ALL:
            raise InvalidOptions("match", match, "upsert changes one job: 'newest' or 'oldest'")
        for name in ("id", "singleton_key"):
            if name in options:
                raise InvalidOptions(name, options[name], f"pass {name} as upsert's own argument")
        name = check_queue_name(queue)
        job = _new_job(data, {**options, "id": selector.id, "singleton_key": singleton_key})
        update = self.engine.update_jobs(name, selector, job.data_json)
        send = self._sent(name, [job])

        def steps() -> Steps[uuid.UUID | None]:
            updated = yield from update.steps()
            if updated:
                return updated[0]
            (sent,) = yield from send.steps()
            return sent

        return Plan(
            "upsert",
            steps,
            transaction=True,
            isolation=send.isolation,
            retry_serialization=send.retry_serialization,
            map_error=send.map_error,
        )

    # flows
    def flow(self, steps: Any) -> tuple[Plan[dict[str, uuid.UUID]], set[str]]:
        """See :meth:`alkstore.Store.flow`: the plan, and the queues it sends to."""
        built = build_flow(steps, new_id)
        return self.engine.flow(built), {step.queue for step in built}

    def get_dependencies(self, queue: str, job_id: IdLike) -> Plan[list[Job]]:
        """See :meth:`alkstore.Store.get_dependencies`."""
        (one,) = targets(job_id).ids
        return self.engine.get_dependencies(check_queue_name(queue), one)

    def get_dependents(self, queue: str, job_id: IdLike) -> Plan[list[Job]]:
        """See :meth:`alkstore.Store.get_dependents`."""
        (one,) = targets(job_id).ids
        return self.engine.get_dependents(check_queue_name(queue), one)

    # maintenance and schema
    def maintenance(self) -> list[tuple[str, Plan[int]]]:
        """The plans of one maintenance pass, each with its :class:`MaintenanceReport` field."""
        e = self.engine
        return [
            ("expired", e.expire()),
            ("heartbeat_expired", e.expire_heartbeats()),
            ("retention_removed", e.remove_expired_retention()),
            ("deleted", e.delete_finished()),
            ("flows_released", e.release_flows()),
        ]

    @staticmethod
    def report(counts: Mapping[str, int]) -> MaintenanceReport:
        """A :class:`MaintenanceReport` from the per-duty counts."""
        return MaintenanceReport(**counts)


__all__ = ["Operations", "error_output"]
