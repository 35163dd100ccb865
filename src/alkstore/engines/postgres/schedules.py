"""The SQL of cron schedules: store, list, remove, pause, resume, trigger, and fire the due
slots.

Firing is one transaction per pass: read the schedules, and for each due slot move the
schedule's ``last_slot`` forward with a conditional ``UPDATE`` (of concurrent schedulers
only the first passes it; the others wait on the row lock, then find the slot taken) and
insert the slot's job, whose id is derived from the slot, so the job table's primary key
refuses a second job for it whatever the timing.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING

from ...core.errors import JobConflict, QueueNotFound, ScheduleNotFound
from ...core.ids import new_id
from ...core.options import NewJob
from ...core.plans import Plan, Statement, Steps
from ...core.records import as_time
from ...core.schedules import Schedule, ScheduleSpec

if TYPE_CHECKING:
    from .send import SendMixin

COLUMNS = (
    "name, key, cron, tz, data::text AS data, options::text AS options, missed, last_slot, "
    "created_on, updated_on, paused_on"
)


def put_schedule(engine: SendMixin, spec: ScheduleSpec) -> Plan[None]:
    """Create or replace the schedule ``(name, key)`` (a replaced one keeps its last slot)."""
    # now() stays in VALUES: sharded Citus refuses non-IMMUTABLE functions in DO UPDATE SET.
    sql = f"""INSERT INTO {engine.s}.schedule (name, key, cron, tz, data, options, missed,
            updated_on)
        VALUES ($1, $2, $3, $4, $5::text::jsonb, $6::text::jsonb, $7, now())
        ON CONFLICT (name, key) DO UPDATE SET cron = EXCLUDED.cron, tz = EXCLUDED.tz,
            data = EXCLUDED.data, options = EXCLUDED.options, missed = EXCLUDED.missed,
            updated_on = EXCLUDED.updated_on"""
    params = (spec.name, spec.key, spec.cron, spec.tz, spec.data_json, spec.options_json)

    def map_error(sqlstate: str | None, constraint: str | None) -> Exception | None:
        if sqlstate == "23503":
            return QueueNotFound(spec.name, field="name")
        return None

    return engine._single(
        "schedule", sql, (*params, spec.missed.value), lambda _rows: None, map_error=map_error
    )


def remove_schedule(engine: SendMixin, name: str, key: str) -> Plan[bool]:
    """Delete the schedule ``(name, key)``; True if there was one."""
    sql = f"DELETE FROM {engine.s}.schedule WHERE name = $1 AND key = $2 RETURNING name"
    return engine._single("unschedule", sql, (name, key), bool)


def list_schedules(engine: SendMixin) -> Plan[list[Schedule]]:
    """Every schedule, by name and key."""
    sql = f"SELECT {COLUMNS} FROM {engine.s}.schedule ORDER BY name, key"
    return engine._single("schedules", sql, (), lambda rows: [Schedule.from_row(r) for r in rows])


def _read_one(engine: SendMixin, name: str, key: str) -> Steps[tuple[Schedule, dt.datetime]]:
    """The schedule ``(name, key)`` and the database's clock, or :class:`ScheduleNotFound`."""
    rows = yield Statement(
        f"SELECT {COLUMNS}, now() AS db_now FROM {engine.s}.schedule WHERE name = $1 AND key = $2",
        (name, key),
    )
    if not rows:
        raise ScheduleNotFound(name, key)
    at = as_time(rows[0]["db_now"])
    assert at is not None
    return Schedule.from_row(rows[0]), at


def pause_schedule(engine: SendMixin, name: str, key: str) -> Plan[bool]:
    """Stop the schedule ``(name, key)`` from firing; False if it was paused already."""

    def steps() -> Steps[bool]:
        schedule, at = yield from _read_one(engine, name, key)
        if schedule.paused_on is not None:
            return False
        paused = yield Statement(
            f"""UPDATE {engine.s}.schedule SET paused_on = $3, updated_on = $3
            WHERE name = $1 AND key = $2 AND paused_on IS NULL RETURNING name""",
            (name, key, at),
        )
        return bool(paused)

    return engine._plan("pause_schedule", steps, transaction=True)


def resume_schedule(engine: SendMixin, name: str, key: str) -> Plan[bool]:
    """Let the paused schedule ``(name, key)`` fire again from its next slot (the slots of
    the pause count as fired: :meth:`~alkstore.core.schedules.Schedule.resumed_last_slot`);
    False if it was not paused."""

    def steps() -> Steps[bool]:
        schedule, at = yield from _read_one(engine, name, key)
        if schedule.paused_on is None:
            return False
        resumed = yield Statement(
            f"""UPDATE {engine.s}.schedule SET paused_on = NULL, updated_on = $4,
                last_slot = greatest(last_slot, $3)
            WHERE name = $1 AND key = $2 AND paused_on IS NOT NULL RETURNING name""",
            (name, key, schedule.resumed_last_slot(at), at),
        )
        return bool(resumed)

    return engine._plan("resume_schedule", steps, transaction=True)


def trigger_schedule(engine: SendMixin, name: str, key: str) -> Plan[uuid.UUID | None]:
    """Send the job of the schedule ``(name, key)`` now, paused or not, without moving its
    last slot; the job's id, or None when the queue's policy refused it."""

    def steps() -> Steps[uuid.UUID | None]:
        schedule, _at = yield from _read_one(engine, name, key)
        job = NewJob.build(schedule.data, schedule.triggered_options(), new_id)
        (sent,) = yield from engine.send(schedule.name, [job]).steps()
        return sent

    return engine._plan("trigger_schedule", steps, transaction=True)


def fire_schedules(engine: SendMixin, now: dt.datetime | None) -> Plan[int]:
    """Send the job of every due slot at ``now`` (None: the database's clock); returns how
    many were sent."""
    s = engine.s

    def steps() -> Steps[int]:
        rows = yield Statement(f"SELECT {COLUMNS}, now() AS db_now FROM {s}.schedule")
        fired = 0
        for row in rows:
            schedule = Schedule.from_row(row)
            at = now or as_time(row["db_now"])
            assert at is not None
            slot = schedule.due(at)
            if slot is None:
                continue
            taken = yield Statement(
                f"""UPDATE {s}.schedule SET last_slot = $3
                WHERE name = $1 AND key = $2 AND (last_slot IS NULL OR last_slot < $3)
                  AND paused_on IS NULL
                RETURNING name""",
                (schedule.name, schedule.key, slot),
            )
            if not taken:
                continue
            job = NewJob.build(schedule.data, schedule.job_options(slot), new_id)
            yield from engine.send(schedule.name, [job]).steps()
            fired += 1
        return fired

    # The slot's job id is the key that enforces one job per slot: should a slot come round
    # again with its job still there (only a shifted clock does that), the pass is refused
    # as a send of an existing id is, not with the driver's raw unique violation.
    def map_error(sqlstate: str | None, _constraint: str | None) -> Exception | None:
        if sqlstate == "23505":
            return JobConflict("the job of a due slot already exists: nothing of the pass fired")
        return None

    return engine._plan("fire_schedules", steps, transaction=True, map_error=map_error)
