"""Cron schedules: the checked arguments of ``store.schedule()``, the stored record, and
which slot is due. Cron expressions are parsed and stepped by cronsim, never by hand.

A *slot* is one time the expression names. A schedule fires at most one job per slot: the
job's id is derived from (queue, key, slot), so the job table's primary key refuses a second
one, and the schedule's ``last_slot`` moves in the same transaction as the insert.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import uuid
import zoneinfo
from collections.abc import Mapping
from typing import Any

import attrs
from cronsim import CronSim, CronSimError

from .errors import InvalidOptions
from .ids import uuid7_at
from .options import JobOptions, dump_json
from .plans import Row
from .records import as_json, as_time
from .validation import check_queue_name

SKIP_GRACE = dt.timedelta(seconds=60)
"""With ``missed="skip"``, how late a slot may still fire (a scheduler looks every second
or so while workers run; a slot older than this was missed, e.g. during downtime)."""
SLOT_NAMESPACE = uuid.UUID("7d0c3f5e-1f3a-4c59-9a57-5d6c1b0e8a21")
"""uuid5 namespace of the hash in the ids of scheduled jobs."""
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
SCHEDULED_OPTIONS = frozenset(
    {
        "priority",
        "retry_limit",
        "retry_delay",
        "retry_backoff",
        "retry_delay_max",
        "expire_seconds",
        "heartbeat_seconds",
        "retention_seconds",
        "deletion_seconds",
        "singleton_key",
        "group_id",
        "group_tier",
    }
)
"""Send options a schedule may carry (``id`` is the slot's, ``start_after`` the slot)."""


class Missed(enum.StrEnum):
    """What a schedule does with slots that passed while no scheduler ran."""

    SKIP = "skip"
    """Fire only slots at most :data:`SKIP_GRACE` old."""
    ONCE = "once"
    """Fire the latest missed slot, once."""


def check_cron(cron: object, tz: object) -> tuple[str, zoneinfo.ZoneInfo]:
    """The expression and the zone, or :class:`InvalidOptions` naming the bad one."""
    if not isinstance(tz, str):
        raise InvalidOptions("tz", tz, "must be an IANA time zone name such as 'UTC'")
    try:
        zone = zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidOptions("tz", tz, f"is not a known time zone ({exc})") from None
    if not isinstance(cron, str):
        raise InvalidOptions("cron", cron, "must be a cron expression such as '*/5 * * * *'")
    try:
        CronSim(cron, dt.datetime.now(zone))
    except CronSimError as exc:
        raise InvalidOptions("cron", cron, f"is not a valid cron expression: {exc}") from None
    return cron, zone


def _text(field: str, value: object, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise InvalidOptions(field, value, f"must be a string of at most {limit} characters")
    return value


@attrs.frozen(kw_only=True)
class ScheduleSpec:
    """The checked arguments of ``store.schedule()``."""

    name: str
    cron: str
    tz: str
    key: str
    missed: Missed
    data_json: str | None
    options_json: str

    @classmethod
    def build(
        cls,
        name: object,
        cron: object,
        data: Any,
        *,
        tz: object,
        key: object,
        missed: object,
        options: Mapping[str, Any],
    ) -> ScheduleSpec:
        """Check every argument (nothing is written when one is wrong)."""
        queue = check_queue_name(name, "name")
        check_cron(cron, tz)
        try:
            how = Missed(str(missed))
        except ValueError:
            raise InvalidOptions("missed", missed, "must be 'skip' or 'once'") from None
        for option in options:
            if option not in SCHEDULED_OPTIONS:
                allowed = sorted(SCHEDULED_OPTIONS)
                raise InvalidOptions(option, options[option], f"is not one of {allowed}")
        JobOptions.from_kwargs(options)  # every value checked as a send would
        return cls(
            name=queue,
            cron=str(cron),
            tz=str(tz),
            key=_text("key", key, 200),
            missed=how,
            data_json=dump_json("data", data),
            options_json=json.dumps(dict(options), sort_keys=True),
        )


@attrs.frozen(kw_only=True)
class Schedule:
    """A stored schedule, as ``store.schedules()`` returns it."""

    name: str
    key: str
    cron: str
    tz: str
    data: Any
    options: dict[str, Any]
    missed: Missed
    last_slot: dt.datetime | None
    created_on: dt.datetime
    updated_on: dt.datetime
    paused_on: dt.datetime | None = None
    """Since when the schedule is paused (None: it fires)."""

    @classmethod
    def from_row(cls, row: Row) -> Schedule:
        """Build from a schedule row (``data`` and ``options`` selected as JSON text)."""
        return cls(
            name=row["name"],
            key=row["key"],
            cron=row["cron"],
            tz=row["tz"],
            data=as_json(row["data"]),
            options=as_json(row["options"]),
            missed=Missed(row["missed"]),
            last_slot=as_time(row["last_slot"]),
            created_on=as_time(row["created_on"]),  # type: ignore[arg-type]
            updated_on=as_time(row["updated_on"]),  # type: ignore[arg-type]
            paused_on=as_time(row["paused_on"]),
        )

    def latest_slot(self, now: dt.datetime) -> dt.datetime:
        """The latest slot at or before ``now`` (UTC)."""
        zone = zoneinfo.ZoneInfo(self.tz)
        after = now.astimezone(zone) + dt.timedelta(microseconds=1)
        return next(CronSim(self.cron, after, reverse=True)).astimezone(dt.UTC)

    def next_slot(self, now: dt.datetime) -> dt.datetime | None:
        """The first slot after ``now`` (UTC): when the schedule fires next, None while it
        is paused."""
        if self.paused_on is not None:
            return None
        zone = zoneinfo.ZoneInfo(self.tz)
        return next(CronSim(self.cron, now.astimezone(zone))).astimezone(dt.UTC)

    def due(self, now: dt.datetime) -> dt.datetime | None:
        """The slot to fire at ``now`` (UTC), or None: the latest slot at or before ``now``,
        if the schedule is not paused, the slot is after the last fired one (or the
        schedule's creation) and, with ``missed="skip"``, at most :data:`SKIP_GRACE` old."""
        if self.paused_on is not None:
            return None
        latest = self.latest_slot(now)
        floor = self.last_slot or self.created_on
        if latest <= floor:
            return None
        if self.missed is Missed.SKIP and now - latest > SKIP_GRACE:
            return None
        return latest

    def resumed_last_slot(self, now: dt.datetime) -> dt.datetime:
        """The ``last_slot`` a resume at ``now`` stores: the slots that passed while the
        schedule was paused count as fired, so a resume never fires a slot of the pause
        (whatever ``missed`` says); the next slot fires as usual."""
        latest = self.latest_slot(now)
        floor = self.last_slot or self.created_on
        return max(latest, floor)

    def slot_id(self, slot: dt.datetime) -> uuid.UUID:
        """The id of this schedule's job for ``slot``: the same in every process."""
        return slot_id(self.name, self.key, slot)

    def job_options(self, slot: dt.datetime) -> JobOptions:
        """The options of the job for ``slot``."""
        return JobOptions.from_kwargs({**self.options, "id": self.slot_id(slot)})

    def triggered_options(self) -> JobOptions:
        """The options of a job sent by ``trigger_schedule``: the schedule's, with a fresh id
        (no slot's: a trigger is a run of its own, and the next slot still fires)."""
        return JobOptions.from_kwargs(self.options)


def slot_id(name: str, key: str, slot: dt.datetime) -> uuid.UUID:
    """The id of the job of schedule ``(name, key)`` for ``slot``: a UUIDv7 whose time is
    the slot's, so scheduled jobs sort among the others by time, and whose other bits are a
    hash of (name, key, slot), so every process derives the same id (one job per slot)."""
    digest = uuid.uuid5(SLOT_NAMESPACE, f"{name}\x00{key}\x00{slot.isoformat()}")
    return uuid7_at((slot - EPOCH) // dt.timedelta(milliseconds=1), digest.int)
