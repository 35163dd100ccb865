"""Single operations per driver: send, fetch of 1, complete of 1, send_many of 1,000, and
complete of 100 beside many running jobs.

Run on demand: ``pytest benchmarks/micro --benchmark-only`` (durable server unless
``$ALKSTORE_BENCH_DSN`` says otherwise). Each round times one call; the setup a round needs
(a job to fetch, a fetched job to complete) runs outside the timing.
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore.bench.drain import job_specs
from alkstore.bench.scale import vacuum_analyze
from conftest import QUEUE, SCHEMA, Ops

ROUNDS = 200


def bench_send(benchmark: Any, ops: Ops) -> None:
    """``send`` of one job."""
    benchmark.pedantic(ops.call, args=("send", QUEUE, {"n": 1}), rounds=ROUNDS, warmup_rounds=5)


def bench_fetch_1(benchmark: Any, ops: Ops) -> None:
    """``fetch`` of one job (one job is sent before each round)."""

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        ops.call("send", QUEUE, {"n": 1})
        return ("fetch", QUEUE), {"batch_size": 1}

    benchmark.pedantic(ops.call, setup=setup, rounds=ROUNDS, warmup_rounds=5)


def bench_complete_1(benchmark: Any, ops: Ops) -> None:
    """``complete`` of one fetched job."""

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        ops.call("send", QUEUE, {"n": 1})
        (job,) = ops.call("fetch", QUEUE, batch_size=1)
        return ("complete", QUEUE, job), {}

    benchmark.pedantic(ops.call, setup=setup, rounds=ROUNDS, warmup_rounds=5)


def bench_send_many_1000(benchmark: Any, ops: Ops) -> None:
    """``send_many`` of 1,000 jobs in one call."""
    specs = job_specs(0, 1000)
    benchmark.pedantic(ops.call, args=("send_many", QUEUE, specs), rounds=30, warmup_rounds=2)


@pytest.mark.parametrize("running", [0, 20_000])
def bench_complete_100_beside_running(
    benchmark: Any, ops: Ops, bench_dsn: str, running: int
) -> None:
    """``complete`` of 100 fetched jobs while ``running`` other jobs of the queue are active,
    the queue analyzed before any ran (docs/benchmarks.md, "Settling by primary key")."""
    rounds, warmup_rounds = 30, 2
    for start in range(0, running + (rounds + warmup_rounds) * 100, 1000):
        ops.call("send_many", QUEUE, job_specs(start, 1000))
    vacuum_analyze(bench_dsn, SCHEMA)
    for _ in range(running // 100):
        ops.call("fetch", QUEUE, batch_size=100)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        jobs = ops.call("fetch", QUEUE, batch_size=100)
        assert len(jobs) == 100
        return ("complete", QUEUE, jobs), {}

    benchmark.pedantic(ops.call, setup=setup, rounds=rounds, warmup_rounds=warmup_rounds)
