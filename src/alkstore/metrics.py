"""Queue statistics for Prometheus: a ``prometheus_client`` collector (``alkstore[metrics]``).

Register :class:`QueueCollector` with a registry and each scrape reads every queue's stats,
its counters and the schedules from the store, or run ``alkstore metrics --port 9108``.
See docs/dashboard.md#prometheus for the metric list.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterator

import attrs
from cronsim import CronSim
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from alkstore.core.counters import EVENTS, Counters, QueueCounters
from alkstore.core.errors import UnsupportedByEngine
from alkstore.core.records import Queue, QueueStats
from alkstore.core.schedules import Schedule
from alkstore.core.states import JobState
from alkstore.store import AsyncStore, Store

COUNTER_HELP = {
    "sent": "Jobs sent to the queue.",
    "completed": "Jobs of the queue that completed.",
    "failed": "Jobs of the queue that failed for good (out of retries).",
    "retried": "Failed attempts of the queue's jobs that were retried.",
    "expired": "Attempts failed by maintenance: past expire_seconds or their heartbeat.",
    "dead_lettered": "Failed jobs of the queue copied to its dead-letter queue.",
}
"""The help text of each ``alkstore_jobs_<event>_total`` counter."""


@attrs.frozen
class Snapshot:
    """What one scrape reads from the store: every queue with its stats, the schedules, the
    counters (None where the engine keeps none) and the moment it read them."""

    queues: list[tuple[Queue, QueueStats]]
    schedules: list[Schedule]
    counters: Counters | None
    now: dt.datetime


def read(store: Store) -> Snapshot:
    """The :class:`Snapshot` of ``store`` now."""
    queues = [(queue, store.queue_stats(queue.name)) for queue in store.queues()]
    try:
        counters: Counters | None = store.counters()
    except UnsupportedByEngine:
        counters = None
    return Snapshot(queues, store.schedules(), counters, dt.datetime.now(dt.UTC))


async def read_async(store: AsyncStore) -> Snapshot:
    """The :class:`Snapshot` of ``store`` now (for an async app such as the dashboard)."""
    queues = [(queue, await store.queue_stats(queue.name)) for queue in await store.queues()]
    try:
        counters: Counters | None = await store.counters()
    except UnsupportedByEngine:
        counters = None
    return Snapshot(queues, await store.schedules(), counters, dt.datetime.now(dt.UTC))


def families(snapshot: Snapshot) -> Iterator[Metric]:
    """The metric families of ``snapshot`` (listed by :class:`QueueCollector`)."""
    jobs = GaugeMetricFamily(
        "alkstore_jobs", "Jobs per queue and state.", labels=["queue", "state"]
    )
    oldest = GaugeMetricFamily(
        "alkstore_oldest_queued_seconds",
        "Seconds the oldest queued job of a queue has waited (0 when none is queued).",
        labels=["queue"],
    )
    paused = GaugeMetricFamily(
        "alkstore_queue_paused", "1 while the queue is paused, else 0.", labels=["queue"]
    )
    for queue, stats in snapshot.queues:
        for state in JobState:
            jobs.add_metric([queue.name, state.value], stats.counts[state])
        age = stats.oldest_queued_age
        oldest.add_metric([queue.name], 0.0 if age is None else age.total_seconds())
        paused.add_metric([queue.name], 1.0 if queue.paused else 0.0)
    yield from (jobs, oldest, paused)
    yield from _schedule_metrics(snapshot.schedules, snapshot.now)
    if snapshot.counters is not None:
        yield from _counter_metrics(snapshot.counters, [q.name for q, _ in snapshot.queues])


def exposition(snapshot: Snapshot) -> bytes:
    """``snapshot`` in Prometheus's text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(snapshot))
    return generate_latest(registry)


class _Fixed(Collector):
    """A collector of one snapshot read already."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        """The families of the snapshot."""
        return families(self._snapshot)


class QueueCollector(Collector):
    """The queues' state read at scrape time (docs/dashboard.md#prometheus).

    Gauges ``alkstore_jobs{queue, state}``, ``alkstore_oldest_queued_seconds{queue}`` (0 with
    none queued), ``alkstore_queue_paused{queue}``, ``alkstore_schedule_lag_seconds{queue,
    key}`` (now minus the last fired slot, or the schedule's creation) and
    ``alkstore_schedule_overdue_seconds{queue, key}`` (how long the oldest slot not fired yet
    has been due; 0 when none is); counters ``alkstore_jobs_<event>_total{queue}`` for each
    event of :data:`~alkstore.core.counters.EVENTS` and the gauge
    ``alkstore_counters_updated_timestamp_seconds`` (the moment the counters count up to),
    where the engine keeps counters (not the in-memory engine).
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        """The metric families of one scrape."""
        return families(read(self._store))


def _counter_metrics(counters: Counters, queues: list[str]) -> Iterator[Metric]:
    """The counters of ``queues`` (0 for a queue with nothing counted yet)."""
    for event in EVENTS:
        family = CounterMetricFamily(
            f"alkstore_jobs_{event}", COUNTER_HELP[event], labels=["queue"]
        )
        for queue in queues:
            family.add_metric([queue], getattr(counters.queues.get(queue, QueueCounters()), event))
        yield family
    updated = GaugeMetricFamily(
        "alkstore_counters_updated_timestamp_seconds",
        "Unix time the counters count up to (0 before the first maintenance pass).",
    )
    until = counters.counted_until
    updated.add_metric([], 0.0 if until is None else until.timestamp())
    yield updated


def _schedule_metrics(schedules: list[Schedule], now: dt.datetime) -> Iterator[Metric]:
    """Each schedule's lag and overdue time at ``now``."""
    lag = GaugeMetricFamily(
        "alkstore_schedule_lag_seconds",
        "Seconds since the schedule's last fired slot (since its creation before the first).",
        labels=["queue", "key"],
    )
    overdue = GaugeMetricFamily(
        "alkstore_schedule_overdue_seconds",
        "Seconds the oldest slot not fired yet has been due (0 when none is due).",
        labels=["queue", "key"],
    )
    for schedule in schedules:
        fired = schedule.last_slot or schedule.created_on
        labels = [schedule.name, schedule.key]
        lag.add_metric(labels, max(0.0, (now - fired).total_seconds()))
        after = fired.astimezone(zoneinfo.ZoneInfo(schedule.tz))
        due = next(CronSim(schedule.cron, after)).astimezone(dt.UTC)
        overdue.add_metric(labels, max(0.0, (now - due).total_seconds()))
    yield from (lag, overdue)


__all__ = ["QueueCollector", "Snapshot", "exposition", "families", "read", "read_async"]
