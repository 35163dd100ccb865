"""Queue statistics for Prometheus: a ``prometheus_client`` collector (``alkstore[metrics]``).

Register :class:`QueueCollector` with a registry and each scrape reads every queue's stats
from the store (one ``queue_stats`` per queue), or run ``alkstore metrics --port 9108``.
See docs/dashboard.md#prometheus.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from alkstore.core.states import JobState
from alkstore.store import Store


class QueueCollector(Collector):
    """Job counts per queue and state, and the oldest queued job's wait, read at scrape time.

    ``alkstore_jobs{queue, state}``: jobs in each state; ``alkstore_oldest_queued_seconds
    {queue}``: how long the oldest job ready to run has waited (0 with none queued).
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The metric families of one scrape."""
        jobs = GaugeMetricFamily(
            "alkstore_jobs", "Jobs per queue and state.", labels=["queue", "state"]
        )
        oldest = GaugeMetricFamily(
            "alkstore_oldest_queued_seconds",
            "Seconds the oldest queued job of a queue has waited (0 when none is queued).",
            labels=["queue"],
        )
        for queue in self._store.queues():
            stats = self._store.queue_stats(queue.name)
            for state in JobState:
                jobs.add_metric([queue.name, state.value], stats.counts[state])
            age = stats.oldest_queued_age
            oldest.add_metric([queue.name], 0.0 if age is None else age.total_seconds())
        yield jobs
        yield oldest


__all__ = ["QueueCollector"]
