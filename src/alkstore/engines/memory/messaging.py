"""Cron schedules and pub/sub of the in-memory engine (docs/workers.md), on the schema's own
records: the engine builds these plans itself (:class:`~alkstore.core.contracts.MessagingPlans`)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import attrs

from ...core.errors import QueueNotFound, ScheduleNotFound
from ...core.ids import new_id
from ...core.options import JobOptions, NewJob
from ...core.plans import Plan
from ...core.schedules import Missed, Schedule, ScheduleSpec
from .database import MemorySchema, SchemaPlans


def _loads(text: str | None) -> object:
    return None if text is None else json.loads(text)


def _found(schema: MemorySchema, name: str, key: str) -> Schedule:
    found = schema.schedules.get((name, key))
    if found is None:
        raise ScheduleNotFound(name, key)
    return found


class MemoryMessaging(SchemaPlans):
    """The schedule and pub/sub plans of a memory schema."""

    def put_schedule(self, spec: ScheduleSpec) -> Plan[None]:
        """Create or replace the schedule ``(name, key)`` (a replaced one keeps its last
        slot)."""

        def put(schema: MemorySchema) -> None:
            if spec.name not in schema.model.queues:
                raise QueueNotFound(spec.name, field="name")
            moment = schema.model.now
            found = schema.schedules.get((spec.name, spec.key))
            options = _loads(spec.options_json)
            assert isinstance(options, dict)
            schema.schedules[(spec.name, spec.key)] = Schedule(
                name=spec.name,
                key=spec.key,
                cron=spec.cron,
                tz=spec.tz,
                data=_loads(spec.data_json),
                options=options,
                missed=Missed(spec.missed),
                last_slot=None if found is None else found.last_slot,
                created_on=moment if found is None else found.created_on,
                updated_on=moment,
            )

        return self._plan("schedule", put)

    def remove_schedule(self, name: str, key: str) -> Plan[bool]:
        """Delete the schedule ``(name, key)``; True if there was one."""
        return self._plan(
            "unschedule", lambda schema: schema.schedules.pop((name, key), None) is not None
        )

    def list_schedules(self) -> Plan[list[Schedule]]:
        """Every schedule, by name and key."""
        return self._plan(
            "schedules", lambda schema: [schema.schedules[k] for k in sorted(schema.schedules)]
        )

    def fire_schedules(self, now: dt.datetime | None) -> Plan[int]:
        """Send the job of every due slot at ``now`` (None: the wall clock); how many."""

        def fire(schema: MemorySchema) -> int:
            if not schema.schedules:
                return 0  # the supervisor's every pass: no copy of the schema for nothing
            with self.database.transaction():
                return fire_due(schema)

        def fire_due(schema: MemorySchema) -> int:
            at = now or schema.model.now
            # One send per queue, as the SQL engines' one statement: the jobs of one pass
            # share their creation and are fetched in id order, not in the schedules' order.
            batches: dict[str, list[tuple[uuid.UUID, Any, JobOptions]]] = {}
            for where in sorted(schema.schedules):
                schedule = schema.schedules[where]
                slot = schedule.due(at)
                if slot is None or (schedule.last_slot is not None and schedule.last_slot >= slot):
                    continue
                schema.schedules[where] = attrs.evolve(schedule, last_slot=slot)
                job = NewJob.build(schedule.data, schedule.job_options(slot), new_id)
                batches.setdefault(schedule.name, []).append(
                    (job.id, _loads(job.data_json), job.options)
                )
            for queue, batch in batches.items():
                schema.model.send_many(queue, batch)
            return sum(len(batch) for batch in batches.values())

        return self._plan("fire_schedules", fire)

    def pause_schedule(self, name: str, key: str) -> Plan[bool]:
        """Stop the schedule ``(name, key)`` from firing; False if it was paused already."""

        def pause(schema: MemorySchema) -> bool:
            found = _found(schema, name, key)
            if found.paused_on is not None:
                return False
            moment = schema.model.now
            schema.schedules[(name, key)] = attrs.evolve(found, paused_on=moment, updated_on=moment)
            return True

        return self._plan("pause_schedule", pause)

    def resume_schedule(self, name: str, key: str) -> Plan[bool]:
        """Let the paused schedule ``(name, key)`` fire again from its next slot; False if
        it was not paused."""

        def resume(schema: MemorySchema) -> bool:
            found = _found(schema, name, key)
            if found.paused_on is None:
                return False
            moment = schema.model.now
            schema.schedules[(name, key)] = attrs.evolve(
                found,
                paused_on=None,
                updated_on=moment,
                last_slot=found.resumed_last_slot(moment),
            )
            return True

        return self._plan("resume_schedule", resume)

    def trigger_schedule(self, name: str, key: str) -> Plan[uuid.UUID | None]:
        """Send the schedule's job now; its id, or None when the queue's policy refused it."""

        def trigger(schema: MemorySchema) -> uuid.UUID | None:
            found = _found(schema, name, key)
            job = NewJob.build(found.data, found.triggered_options(), new_id)
            (sent,) = schema.model.send_many(
                found.name, [(job.id, _loads(job.data_json), job.options)]
            )
            return sent

        return self._plan("trigger_schedule", trigger)

    def subscribe_queue(self, event: str, queue: str) -> Plan[None]:
        """Subscribe ``queue`` to ``event`` (again: nothing changes)."""

        def subscribe(schema: MemorySchema) -> None:
            if queue not in schema.model.queues:
                raise QueueNotFound(queue)
            schema.subscriptions.add((event, queue))

        return self._plan("subscribe", subscribe)

    def unsubscribe_queue(self, event: str, queue: str) -> Plan[bool]:
        """Remove the subscription; True if there was one."""

        def unsubscribe(schema: MemorySchema) -> bool:
            found = (event, queue) in schema.subscriptions
            schema.subscriptions.discard((event, queue))
            return found

        return self._plan("unsubscribe", unsubscribe)

    def publish_event(
        self, event: str, data_json: str | None, options: JobOptions
    ) -> Plan[list[tuple[str, uuid.UUID]]]:
        """One job for every queue subscribed to ``event``, all or none (a job's
        ``dead_letter`` may be refused for one queue); ``(queue, id)`` of each, by queue."""

        def publish(schema: MemorySchema) -> list[tuple[str, uuid.UUID]]:
            sent = []
            for subscribed, queue in sorted(schema.subscriptions):
                if subscribed != event or queue not in schema.model.queues:
                    continue
                job_id = new_id()
                (done,) = schema.model.send_many(queue, [(job_id, _loads(data_json), options)])
                if done is not None:
                    sent.append((queue, done))
            return sent

        return self._plan("publish", publish, transaction=True)

    def forget_queue(self, schema: MemorySchema, name: str) -> None:
        """A deleted queue's schedules and subscriptions go with it."""
        for where in [w for w in schema.schedules if w[0] == name]:
            del schema.schedules[where]
        schema.subscriptions = {s for s in schema.subscriptions if s[1] != name}
