"""Which cron slot is due: :meth:`alkstore.core.schedules.Schedule.due` (pure, no database)."""

from __future__ import annotations

import datetime as dt

import attrs
import pytest

from alkstore import InvalidOptions
from alkstore.core.schedules import Missed, Schedule, ScheduleSpec

T0 = dt.datetime(2026, 3, 1, 11, 58, 30, tzinfo=dt.UTC)


def _schedule(cron: str, *, tz: str = "UTC", missed: Missed = Missed.SKIP, last=None) -> Schedule:
    return Schedule(
        name="q",
        key="",
        cron=cron,
        tz=tz,
        data=None,
        options={},
        missed=missed,
        last_slot=last,
        created_on=T0,
        updated_on=T0,
    )


def test_the_latest_slot_after_creation_is_due():
    every_minute = _schedule("* * * * *")
    assert every_minute.due(T0 + dt.timedelta(seconds=10)) is None
    assert every_minute.due(T0 + dt.timedelta(seconds=30)) == T0.replace(minute=59, second=0)
    assert every_minute.due(T0.replace(minute=59, second=0)) == T0.replace(minute=59, second=0)


def test_a_fired_slot_is_not_due_again():
    slot = T0.replace(minute=59, second=0)
    assert _schedule("* * * * *", last=slot).due(slot + dt.timedelta(seconds=59)) is None
    assert _schedule("* * * * *", last=slot).due(slot + dt.timedelta(seconds=60)) == slot.replace(
        hour=12, minute=0
    )


def test_missed_skip_and_once():
    later = T0 + dt.timedelta(hours=5, minutes=30)
    latest = later.replace(minute=0, second=0)
    assert _schedule("0 * * * *").due(later) is None
    assert _schedule("0 * * * *", missed=Missed.ONCE).due(later) == latest
    assert _schedule("0 * * * *").due(latest + dt.timedelta(seconds=59)) == latest


def test_slots_follow_the_time_zone():
    # 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer.
    berlin = _schedule("0 9 * * *", tz="Europe/Berlin", missed=Missed.ONCE)
    assert berlin.due(dt.datetime(2026, 3, 2, 8, 0, 5, tzinfo=dt.UTC)) == dt.datetime(
        2026, 3, 2, 8, 0, tzinfo=dt.UTC
    )
    summer = dt.datetime(2026, 7, 2, 7, 0, 5, tzinfo=dt.UTC)
    assert berlin.due(summer) == dt.datetime(2026, 7, 2, 7, 0, tzinfo=dt.UTC)


def test_slot_ids_are_stable_and_distinct():
    a, b = _schedule("* * * * *"), _schedule("* * * * *")
    slot = T0.replace(second=0)
    assert a.slot_id(slot) == b.slot_id(slot)
    assert a.slot_id(slot) != a.slot_id(slot + dt.timedelta(minutes=1))


def test_slot_ids_are_uuid7_of_the_slot_time_and_sort_by_slot():
    schedule = _schedule("* * * * *")
    slots = [T0.replace(second=0) + dt.timedelta(minutes=m) for m in (2, 0, 1)]
    ids = [schedule.slot_id(slot) for slot in slots]
    assert all(i.version == 7 for i in ids)
    assert [i.int >> 80 for i in ids] == [int(s.timestamp() * 1000) for s in slots]
    assert sorted(ids) == [ids[1], ids[2], ids[0]]
    other_key = attrs.evolve(schedule, key="other")
    assert other_key.slot_id(slots[0]) != ids[0]


def test_a_paused_schedule_is_never_due_and_has_no_next_run():
    paused = attrs.evolve(_schedule("* * * * *", missed=Missed.ONCE), paused_on=T0)
    assert paused.due(T0 + dt.timedelta(hours=1)) is None
    assert paused.next_slot(T0) is None
    assert _schedule("0 9 * * *").next_slot(T0) == dt.datetime(2026, 3, 2, 9, tzinfo=dt.UTC)


def test_a_resume_counts_the_slots_of_the_pause_as_fired():
    paused = attrs.evolve(_schedule("0 * * * *", missed=Missed.ONCE), paused_on=T0)
    back = T0 + dt.timedelta(hours=5, minutes=30)
    resumed = attrs.evolve(paused, paused_on=None, last_slot=paused.resumed_last_slot(back))
    assert resumed.last_slot == back.replace(minute=0, second=0)
    assert resumed.due(back + dt.timedelta(minutes=10)) is None  # no backlog slot fires
    next_hour = back.replace(minute=0, second=0) + dt.timedelta(hours=1)
    assert resumed.due(next_hour) == next_hour
    # A pause shorter than a slot leaves the creation as the floor.
    assert paused.resumed_last_slot(T0 + dt.timedelta(seconds=5)) == T0


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("cron", {"cron": "61 * * * *"}),
        ("tz", {"tz": "Nowhere/City"}),
        ("missed", {"missed": "always"}),
        ("key", {"key": 5}),
        ("id", {"options": {"id": "x"}}),
    ],
)
def test_spec_names_the_bad_argument(field, kwargs):
    args = {"cron": "* * * * *", "tz": "UTC", "key": "", "missed": "skip", "options": {}}
    args.update(kwargs)
    cron = args.pop("cron")
    with pytest.raises(InvalidOptions) as info:
        ScheduleSpec.build("q", cron, None, **args)
    assert info.value.field == field
