"""Cron schedules: stored and listed, exactly one job per slot however many schedulers run
at once (on a controllable clock: ``fire_schedules(now=...)``), missed slots, the
supervisor firing them."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from alkstore import InvalidOptions, JobState, QueueNotFound, ScheduleNotFound
from alkstore.conformance.harness import StoreHandle

from .conftest import eventually
from .workers import work


def _created(alkstore_store: StoreHandle, name: str = "q") -> dt.datetime:
    (found,) = [s for s in alkstore_store.schedules() if s.name == name]
    return found.created_on  # type: ignore[no-any-return]


def test_schedules_are_stored_replaced_and_removed(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.schedule("q", "*/5 * * * *", {"a": 1}, priority=3)
    alkstore_store.schedule(
        "q", "0 9 * * 1-5", None, tz="Europe/Berlin", key="mornings", missed="once"
    )
    alkstore_store.schedule("q", "*/10 * * * *", {"a": 2}, priority=4)
    found = alkstore_store.schedules()
    assert [(s.key, s.cron, s.tz, s.missed.value) for s in found] == [
        ("", "*/10 * * * *", "UTC", "skip"),
        ("mornings", "0 9 * * 1-5", "Europe/Berlin", "once"),
    ]
    assert found[0].data == {"a": 2} and found[0].options == {"priority": 4}
    assert alkstore_store.unschedule("q", "mornings") is True
    assert alkstore_store.unschedule("q", "mornings") is False
    assert [s.key for s in alkstore_store.schedules()] == [""]
    alkstore_store.delete_queue("q")
    assert alkstore_store.schedules() == []


def test_schedule_checks_its_arguments(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions, match="cron"):
        alkstore_store.schedule("q", "every day")
    with pytest.raises(InvalidOptions, match="tz"):
        alkstore_store.schedule("q", "* * * * *", tz="Mars/Olympus")
    with pytest.raises(InvalidOptions, match="missed"):
        alkstore_store.schedule("q", "* * * * *", missed="twice")
    with pytest.raises(InvalidOptions, match="start_after"):
        alkstore_store.schedule("q", "* * * * *", start_after=5)
    with pytest.raises(InvalidOptions, match="priority"):
        alkstore_store.schedule("q", "* * * * *", priority="high")
    with pytest.raises(QueueNotFound):
        alkstore_store.schedule("nope", "* * * * *")
    assert alkstore_store.schedules() == []


def test_a_due_slot_sends_one_job_with_the_schedules_data_and_options(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.schedule("q", "* * * * *", {"report": "daily"}, priority=7)
    start = _created(alkstore_store)
    assert alkstore_store.fire_schedules(now=start) == 0
    later = start + dt.timedelta(seconds=61)
    assert alkstore_store.fire_schedules(now=later) == 1
    assert alkstore_store.fire_schedules(now=later) == 0
    (job,) = alkstore_store.fetch("q")
    assert job.data == {"report": "daily"} and job.priority == 7


@pytest.mark.requires("several_sessions")
def test_exactly_one_job_per_slot_with_five_concurrent_schedulers(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.schedule("q", "* * * * *", "tick")
    start = _created(alkstore_store)
    steps = [start + dt.timedelta(seconds=30 * k) for k in range(1, 21)]  # 10 minutes
    schedulers = [alkstore_store, *(alkstore_store.sibling() for _ in range(4))]
    fired: list[int] = []
    barrier = threading.Barrier(len(schedulers))

    def run(scheduler: StoreHandle) -> None:
        barrier.wait(30)
        fired.extend(scheduler.fire_schedules(now=now) for now in steps)

    threads = [threading.Thread(target=run, args=(s,)) for s in schedulers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        for sibling in schedulers[1:]:
            sibling.close()
    assert sum(fired) == 10
    assert alkstore_store.queue_stats("q").counts[JobState.CREATED] == 10


def test_missed_slots_skip_or_fire_once(alkstore_store):
    alkstore_store.create_queue("skip")
    alkstore_store.create_queue("once")
    alkstore_store.schedule("skip", "0 * * * *")
    alkstore_store.schedule("once", "0 * * * *", missed="once")
    start = max(_created(alkstore_store, "skip"), _created(alkstore_store, "once"))
    # Three hours of downtime; the latest slot is more than a minute old by now.
    hours = start.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=3)
    back = hours + dt.timedelta(minutes=10)
    assert alkstore_store.fire_schedules(now=back) == 1
    assert alkstore_store.queue_stats("skip").total == 0
    assert alkstore_store.queue_stats("once").total == 1
    assert alkstore_store.fire_schedules(now=back + dt.timedelta(minutes=20)) == 0
    # The next slot is seen in time by both.
    assert alkstore_store.fire_schedules(now=hours + dt.timedelta(hours=1, seconds=5)) == 2
    assert alkstore_store.queue_stats("skip").total == 1
    assert alkstore_store.queue_stats("once").total == 2


def test_a_paused_schedule_fires_nothing_until_resumed(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.schedule("q", "* * * * *", "tick", missed="once")
    start = _created(alkstore_store)
    assert alkstore_store.pause_schedule("q") is True
    assert alkstore_store.pause_schedule("q") is False
    (paused,) = alkstore_store.schedules()
    assert paused.paused_on is not None and paused.next_slot(start) is None
    later = start + dt.timedelta(seconds=61)
    assert alkstore_store.fire_schedules(now=later) == 0
    assert alkstore_store.resume_schedule("q") is True
    assert alkstore_store.resume_schedule("q") is False
    (resumed,) = alkstore_store.schedules()
    assert resumed.paused_on is None and resumed.next_slot(start) is not None
    # The slots before the resume count as fired; the next one fires.
    assert resumed.last_slot is not None and resumed.last_slot <= later
    assert alkstore_store.fire_schedules(now=later + dt.timedelta(minutes=1)) == 1
    for refused in ("pause_schedule", "resume_schedule", "trigger_schedule"):
        with pytest.raises(ScheduleNotFound, match="nope"):
            getattr(alkstore_store, refused)("q", "nope")


def test_a_triggered_schedule_sends_its_job_now_and_keeps_its_slots(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.schedule("q", "0 0 1 1 *", {"report": "yearly"}, priority=5)
    alkstore_store.pause_schedule("q")
    first = alkstore_store.trigger_schedule("q")
    second = alkstore_store.trigger_schedule("q")
    assert first is not None and second is not None and first < second
    jobs = alkstore_store.fetch("q", batch_size=5)
    assert [(j.id, j.data, j.priority) for j in jobs] == [
        (first, {"report": "yearly"}, 5),
        (second, {"report": "yearly"}, 5),
    ]
    (schedule,) = alkstore_store.schedules()
    assert schedule.last_slot is None and schedule.paused_on is not None
    alkstore_store.create_queue("short", policy="short")
    alkstore_store.schedule("short", "* * * * *", singleton_key="k")
    assert alkstore_store.trigger_schedule("short") is not None
    assert alkstore_store.trigger_schedule("short") is None  # the policy refused it


def test_the_supervisor_of_a_worker_fires_schedules(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.schedule("q", "* * * * *", "from cron")
    # The schedule was made a minute ago, so the minute that began since is due now.
    alkstore_store.advance(61)
    seen = []
    fast = {"poll_interval": 0.05, "maintenance_interval": 0.1}
    with work(alkstore_store, "q", lambda job, ctx: seen.append(job.data), **fast):
        eventually(lambda: seen == ["from cron"])
    assert alkstore_store.queue_stats("q").counts[JobState.COMPLETED] == 1
