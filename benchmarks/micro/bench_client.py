"""Client-side work of a batch fetch, no server: ordering the fetched jobs.

Run on demand: ``pytest benchmarks/micro --benchmark-only -k client``. A claim's rows come
back in no particular order, so ``fetch`` sorts its jobs into fetch order on the client
(docs/benchmarks.md, "Quiet machine, 2026-12-01, fourth session").
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from alkstore.core.ids import new_ids
from alkstore.core.lean import LeanJob
from alkstore.core.records import Job
from alkstore.core.states import JobState

ROUNDS = 3000


def bench_sort_fetched_batch(benchmark: Any) -> None:
    """Sort 100 fetched jobs of one ``send_many`` (one priority, one ``created_on``, so the
    ids decide) into fetch order."""
    sent = dt.datetime.now(dt.UTC)
    jobs = [
        LeanJob.of(i, "q", {}, JobState.ACTIVE, 0, 1, 2, 900, None, None, None, None, sent, None)
        for i in new_ids(100)
    ]
    in_order = list(jobs)
    random.Random(7).shuffle(jobs)
    result = benchmark.pedantic(
        sorted, args=(jobs,), kwargs={"key": Job.sort_key}, rounds=ROUNDS, warmup_rounds=10
    )
    assert result == in_order
