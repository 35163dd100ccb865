"""Cron schedules and pub/sub as plans: argument checks at the API edge, then the engine's
plans for them (:class:`~alkstore.core.contracts.MessagingPlans`, part of the engine
contract). Both faces build their plans here, like :class:`~alkstore.operations.Operations`."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

from .core.contracts import Engine, MessagingPlans, messaging_plans
from .core.errors import InvalidOptions
from .core.options import JobOptions, dump_json
from .core.plans import Plan
from .core.schedules import Schedule, ScheduleSpec
from .core.validation import check_queue_name


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
        self._engine = engine

    @property
    def engine(self) -> MessagingPlans:
        """The engine's plans for these (else refused by name, when asked for)."""
        return messaging_plans(self._engine)

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
        return self.engine.put_schedule(spec)

    def unschedule(self, name: str, key: str) -> Plan[bool]:
        """See :meth:`alkstore.Store.unschedule`."""
        return self.engine.remove_schedule(*_schedule_key(name, key))

    def pause_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :meth:`alkstore.Store.pause_schedule`."""
        return self.engine.pause_schedule(*_schedule_key(name, key))

    def resume_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :meth:`alkstore.Store.resume_schedule`."""
        return self.engine.resume_schedule(*_schedule_key(name, key))

    def trigger_schedule(self, name: str, key: str) -> Plan[uuid.UUID | None]:
        """See :meth:`alkstore.Store.trigger_schedule`."""
        return self.engine.trigger_schedule(*_schedule_key(name, key))

    def schedules(self) -> Plan[list[Schedule]]:
        """See :meth:`alkstore.Store.schedules`."""
        return self.engine.list_schedules()

    def fire_schedules(self, now: dt.datetime | None) -> Plan[int]:
        """See :meth:`alkstore.Store.fire_schedules`."""
        if now is not None and (not isinstance(now, dt.datetime) or now.tzinfo is None):
            raise InvalidOptions("now", now, "must be an aware datetime or None")
        return self.engine.fire_schedules(now)

    def subscribe(self, event: str, queue: str) -> Plan[None]:
        """See :meth:`alkstore.Store.subscribe`."""
        return self.engine.subscribe_queue(_event(event), check_queue_name(queue))

    def unsubscribe(self, event: str, queue: str) -> Plan[bool]:
        """See :meth:`alkstore.Store.unsubscribe`."""
        return self.engine.unsubscribe_queue(_event(event), check_queue_name(queue))

    def publish(
        self, event: str, data: Any, options: Mapping[str, Any]
    ) -> Plan[list[tuple[str, uuid.UUID]]]:
        """See :meth:`alkstore.Store.publish`."""
        if "id" in options:
            raise InvalidOptions("id", options["id"], "publish makes one job per queue")
        opts = JobOptions.from_kwargs(options)
        return self.engine.publish_event(_event(event), dump_json("data", data), opts)
