"""The public operations as plans: argument checks at the API edge, then the engine's plan.

Both faces (:class:`~alkstore.store.Store` and :class:`~alkstore.store.AsyncStore`) call
these builders and only differ in how they run the plan, so every check and every result
mapping here is written once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .core.contracts import Engine
from .core.errors import InvalidOptions, QueueOptionsDiffer
from .core.ids import new_id
from .core.options import JobOptions, NewJob, QueueOptions, dump_json
from .core.plans import Plan
from .core.records import Handoff, Job, MaintenanceReport, Queue, QueueStats
from .core.targets import IdLike, targets
from .core.validation import INT_MAX, check_queue_name, is_int


def error_output(error: Any) -> str | None:
    """The JSON stored in ``output`` when a job fails: exceptions become name + message."""
    if isinstance(error, BaseException):
        error = {"name": type(error).__name__, "message": str(error)}
    return dump_json("error", error)


NO_OPTIONS = JobOptions()
"""Shared by every job sent without options (most of a large ``send_many``)."""


def _new_job(data: Any, options: Mapping[str, Any]) -> NewJob:
    opts = JobOptions.from_kwargs(options) if options else NO_OPTIONS
    return NewJob.build(data, opts, new_id)


def _positive(field: str, value: object) -> int:
    if not is_int(value) or not 1 <= value <= INT_MAX:  # type: ignore[operator]
        raise InvalidOptions(field, value, f"must be an integer from 1 to {INT_MAX}")
    return value  # type: ignore[return-value]


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
    def send(self, queue: str, data: Any, options: Mapping[str, Any]) -> Plan[uuid.UUID]:
        """See :meth:`alkstore.Store.send`."""
        job = _new_job(data, options)
        return self.engine.send(check_queue_name(queue), [job]).then(lambda ids: ids[0])

    def send_many(self, queue: str, jobs: Iterable[Mapping[str, Any]]) -> Plan[list[uuid.UUID]]:
        """See :meth:`alkstore.Store.send_many`."""
        check_queue_name(queue)
        built = []
        for index, spec in enumerate(jobs):
            if not isinstance(spec, Mapping):
                raise InvalidOptions(
                    f"jobs[{index}]", spec, "must be a mapping: {'data': ..., **options}"
                )
            options = {k: v for k, v in spec.items() if k != "data"}
            built.append(_new_job(spec.get("data"), options))
        return self.engine.send(queue, built)

    def fetch(self, queue: str, batch_size: int) -> Plan[list[Job]]:
        """See :meth:`alkstore.Store.fetch`."""
        return self.engine.fetch(check_queue_name(queue), _positive("batch_size", batch_size))

    def complete(self, queue: str, ids: IdLike | Iterable[IdLike], output: Any) -> Plan[int]:
        """See :meth:`alkstore.Store.complete`."""
        return self.engine.complete(
            check_queue_name(queue), targets(ids), dump_json("output", output)
        )

    def complete_and_fetch(
        self, queue: str, ids: IdLike | Iterable[IdLike], output: Any, batch_size: int
    ) -> list[Plan[Any]]:
        """See :meth:`alkstore.Store.complete_and_fetch`: one plan, or where the engine cannot
        do both in one statement, the ``complete`` and ``fetch`` plans to run in turn."""
        name = check_queue_name(queue)
        batch = _positive("batch_size", batch_size)
        done, output_json = targets(ids), dump_json("output", output)
        both = self.engine.complete_and_fetch(name, done, output_json, batch)
        if both is not None:
            return [both]
        return [self.engine.complete(name, done, output_json), self.engine.fetch(name, batch)]

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

    # maintenance and schema
    def maintenance(self) -> list[tuple[str, Plan[int]]]:
        """The plans of one maintenance pass, each with its :class:`MaintenanceReport` field."""
        e = self.engine
        return [
            ("expired", e.expire()),
            ("heartbeat_expired", e.expire_heartbeats()),
            ("retention_removed", e.remove_expired_retention()),
            ("deleted", e.delete_finished()),
        ]

    @staticmethod
    def report(counts: Mapping[str, int]) -> MaintenanceReport:
        """A :class:`MaintenanceReport` from the per-duty counts."""
        return MaintenanceReport(**counts)


__all__ = ["Operations", "error_output"]
