"""Stage timestamps along the wake-up path, for ``alkstore bench latency`` (off by default).

When :data:`PROBE` is set (the bench does, with :func:`enable`), the runtime stamps, with
``time.perf_counter_ns()``: when the listener received a queue's notification, when the
fetcher (thread or task) ran after its wait, when the claim began and when it returned, one
record per claimed job, which the bench takes back by job id when the handler starts. Off,
each point costs one module attribute read.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable

NOTIFIED, WOKEN, CLAIMING, CLAIMED = "notified", "woken", "claiming", "claimed"
"""The stamped points, in path order."""


class Probe:
    """The stamps of one bench run. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._notified: dict[str, int] = {}
        self._jobs: dict[uuid.UUID, dict[str, int]] = {}

    def notified(self, queue: str) -> None:
        """The listener received a notification for ``queue`` now."""
        now = time.perf_counter_ns()
        with self._lock:
            self._notified[queue] = now

    def claimed(self, queue: str, woken: int, claiming: int, job_ids: Iterable[uuid.UUID]) -> None:
        """A fetcher that ran at ``woken`` began a claim at ``claiming`` that returned now."""
        now = time.perf_counter_ns()
        with self._lock:
            stamps = {WOKEN: woken, CLAIMING: claiming, CLAIMED: now}
            notified = self._notified.get(queue)
            if notified is not None and notified <= woken:
                stamps[NOTIFIED] = notified
            for job_id in job_ids:
                self._jobs[job_id] = stamps

    def take(self, job_id: uuid.UUID) -> dict[str, int]:
        """The stamps of ``job_id``'s claim (empty when it was claimed another way, e.g. by
        a slot's ``complete_and_fetch``)."""
        with self._lock:
            return self._jobs.pop(job_id, {})


PROBE: Probe | None = None
"""The active probe, or None (the default: nothing is stamped)."""


def enable() -> Probe:
    """Start stamping into a new probe (the bench's, for one measured cell)."""
    global PROBE
    PROBE = Probe()
    return PROBE


def disable() -> None:
    """Stop stamping."""
    global PROBE
    PROBE = None


def now_ns() -> int:
    """A stamp (0 when no probe is active: the caller need not read the clock)."""
    return time.perf_counter_ns() if PROBE is not None else 0


__all__ = ["CLAIMED", "CLAIMING", "NOTIFIED", "PROBE", "WOKEN", "Probe", "disable", "enable"]
