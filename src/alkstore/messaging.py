"""Cron schedules and pub/sub as plans: argument checks at the API edge, then the engine's
SQL (:mod:`~alkstore.engines.postgres.schedules`, :mod:`~alkstore.engines.postgres.pubsub`).
Both faces build their plans here, like :class:`~alkstore.operations.Operations`."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from .core.contracts import Engine
from .core.errors import InvalidOptions
from .core.options import JobOptions, dump_json
from .core.plans import Plan
from .core.schedules import Schedule, ScheduleSpec
from .core.validation import check_queue_name
from .engines.postgres import PostgresEngine, pubsub
from .engines.postgres import schedules as sql
from .engines.postgres.runtime import runtime_engine


@runtime_checkable
class OwnMessaging(Protocol):
    """An engine that builds the plans of schedules and pub/sub itself instead of running
    the postgres family's SQL for them (the in-memory engine)."""

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
        """Stop a schedule from firing; False if it was paused already."""
        ...

    def resume_schedule(self, name: str, key: str) -> Plan[bool]:
        """Let a paused schedule fire again; False if it was not paused."""
        ...

    def trigger_schedule(self, name: str, key: str) -> Plan[uuid.UUID | None]:
        """Send a schedule's job now; its id, or None when the queue's policy refused it."""
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


def _event(event: object) -> str:
    if not isinstance(event, str) or not 1 <= len(event) <= 200:
        raise InvalidOptions("event", event, "must be a string of 1 to 200 characters")
    return event


def _schedule_key(name: object, key: object) -> tuple[str, str]:
    if not isinstance(key, str):
        raise InvalidOptions("key", key, "must be a string")
    return check_queue_name(name, "name"), key


class Messaging:
    """Builds the plans of schedules and pub/sub for one engine."""

    def __init__(self, engine: Engine) -> None:
        self.own: OwnMessaging | None = engine if isinstance(engine, OwnMessaging) else None
        """The engine when it builds these plans itself."""
        self._engine = engine

    @property
    def engine(self) -> PostgresEngine:
        """The postgres-family engine whose SQL these plans run (else refused by name)."""
        return runtime_engine(self._engine)

    def schedule(
        self,
        name: str,
        cron: str,
        data: Any,
        *,
        tz: str,
        key: str,
        missed: str,
        options: Mapping[str, Any],
    ) -> Plan[None]:
        """See :meth:`alkstore.Store.schedule`."""
        spec = ScheduleSpec.build(name, cron, data, tz=tz, key=key, missed=missed, options=options)
        if self.own is not None:
            return self.own.put_schedule(spec)
        return sql.put_schedule(self.engine, spec)

    def unschedule(self, name: str, key: str) -> Plan[bool]:
        """See :meth:`alkstore.Store.unschedule`."""
        name, key = _schedule_key(name, key)
        if self.own is not None:
            return self.own.remove_schedule(name, key)
        return sql.remove_schedule(self.engine, name, key)

    def pause_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :meth:`alkstore.Store.pause_schedule`."""
        name, key = _schedule_key(name, key)
        if self.own is not None:
            return self.own.pause_schedule(name, key)
        return sql.pause_schedule(self.engine, name, key)

    def resume_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :meth:`alkstore.Store.resume_schedule`."""
        name, key = _schedule_key(name, key)
        if self.own is not None:
            return self.own.resume_schedule(name, key)
        return sql.resume_schedule(self.engine, name, key)

    def trigger_schedule(self, name: str, key: str) -> Plan[uuid.UUID | None]:
        """See :meth:`alkstore.Store.trigger_schedule`."""
        name, key = _schedule_key(name, key)
        if self.own is not None:
            return self.own.trigger_schedule(name, key)
        return sql.trigger_schedule(self.engine, name, key)

    def schedules(self) -> Plan[list[Schedule]]:
        """See :meth:`alkstore.Store.schedules`."""
        if self.own is not None:
            return self.own.list_schedules()
        return sql.list_schedules(self.engine)

    def fire_schedules(self, now: dt.datetime | None) -> Plan[int]:
        """See :meth:`alkstore.Store.fire_schedules`."""
        if now is not None and (not isinstance(now, dt.datetime) or now.tzinfo is None):
            raise InvalidOptions("now", now, "must be an aware datetime or None")
        if self.own is not None:
            return self.own.fire_schedules(now)
        return sql.fire_schedules(self.engine, now)

    def subscribe(self, event: str, queue: str) -> Plan[None]:
        """See :meth:`alkstore.Store.subscribe`."""
        if self.own is not None:
            return self.own.subscribe_queue(_event(event), check_queue_name(queue))
        return pubsub.subscribe(self.engine, _event(event), check_queue_name(queue))

    def unsubscribe(self, event: str, queue: str) -> Plan[bool]:
        """See :meth:`alkstore.Store.unsubscribe`."""
        if self.own is not None:
            return self.own.unsubscribe_queue(_event(event), check_queue_name(queue))
        return pubsub.unsubscribe(self.engine, _event(event), check_queue_name(queue))

    def publish(
        self, event: str, data: Any, options: Mapping[str, Any]
    ) -> Plan[list[tuple[str, uuid.UUID]]]:
        """See :meth:`alkstore.Store.publish`."""
        if "id" in options:
            raise InvalidOptions("id", options["id"], "publish makes one job per queue")
        opts = JobOptions.from_kwargs(options)
        if self.own is not None:
            return self.own.publish_event(_event(event), dump_json("data", data), opts)
        return pubsub.publish(self.engine, _event(event), dump_json("data", data), opts)
