"""The schedule and pub/sub plans of the engine contract
(:class:`~alkstore.core.contracts.MessagingPlans`), on the SQL of :mod:`.schedules` and
:mod:`.pubsub`."""

from __future__ import annotations

import datetime as dt
import uuid

from ...core.options import JobOptions
from ...core.plans import Plan
from ...core.schedules import Schedule, ScheduleSpec
from . import pubsub, schedules
from .send import SendMixin


class MessagingMixin(SendMixin):
    """Schedules and pub/sub (a schedule's slot is sent as a job, hence :class:`SendMixin`)."""

    def put_schedule(self, spec: ScheduleSpec) -> Plan[None]:
        """See :func:`.schedules.put_schedule`."""
        return schedules.put_schedule(self, spec)

    def remove_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :func:`.schedules.remove_schedule`."""
        return schedules.remove_schedule(self, name, key)

    def list_schedules(self) -> Plan[list[Schedule]]:
        """See :func:`.schedules.list_schedules`."""
        return schedules.list_schedules(self)

    def fire_schedules(self, now: dt.datetime | None) -> Plan[int]:
        """See :func:`.schedules.fire_schedules`."""
        return schedules.fire_schedules(self, now)

    def pause_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :func:`.schedules.pause_schedule`."""
        return schedules.pause_schedule(self, name, key)

    def resume_schedule(self, name: str, key: str) -> Plan[bool]:
        """See :func:`.schedules.resume_schedule`."""
        return schedules.resume_schedule(self, name, key)

    def trigger_schedule(self, name: str, key: str) -> Plan[uuid.UUID | None]:
        """See :func:`.schedules.trigger_schedule`."""
        return schedules.trigger_schedule(self, name, key)

    def subscribe_queue(self, event: str, queue: str) -> Plan[None]:
        """See :func:`.pubsub.subscribe`."""
        return pubsub.subscribe(self, event, queue)

    def unsubscribe_queue(self, event: str, queue: str) -> Plan[bool]:
        """See :func:`.pubsub.unsubscribe`."""
        return pubsub.unsubscribe(self, event, queue)

    def publish_event(
        self, event: str, data_json: str | None, options: JobOptions
    ) -> Plan[list[tuple[str, uuid.UUID]]]:
        """See :func:`.pubsub.publish`."""
        return pubsub.publish(self, event, data_json, options)
