"""Which ``wal_sync_method`` commits fastest on this disk, measured the way a send commits.

``python benchmarks/wal_sync.py [--commits 1000] [--method fdatasync ...]`` starts one
throwaway durable server per method (the bench server's settings, ``alkstore.bench.server``)
with its data directory where the bench puts it, and commits one single-row ``INSERT`` on
each in turn, round-robin, so the servers share whatever else the machine is doing. It
prints each method's commit p50/p99 in milliseconds. A method marked ``+minimal`` also runs
with ``wal_level=minimal``, under which PostgreSQL 15 opens WAL with ``O_DIRECT`` for the
``open_*`` methods (what ``pg_test_fsync`` measures for them).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import psycopg

from alkstore.bench.server import BENCH_MAX_CONNECTIONS, DURABLE_SETTINGS
from alkstore.conformance.cluster import TempCluster

METHODS = ("fdatasync", "fsync", "open_datasync", "open_sync", "open_datasync+minimal")
MINIMAL = {"wal_level": "minimal", "max_wal_senders": "0"}


def settings(method: str) -> dict[str, str]:
    """The server settings of one measured method."""
    name, _, extra = method.partition("+")
    return {**DURABLE_SETTINGS, "wal_sync_method": name, **(MINIMAL if extra else {})}


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1000, help="commits per method")
    parser.add_argument("--method", action="append", help=f"repeatable (default: {METHODS})")
    args = parser.parse_args()
    methods = args.method or list(METHODS)
    took: dict[str, list[float]] = {m: [] for m in methods}
    with contextlib.ExitStack() as stack:
        conns = {}
        for method in methods:
            cluster = stack.enter_context(
                TempCluster(max_connections=BENCH_MAX_CONNECTIONS, settings=settings(method))
            )
            conn = stack.enter_context(psycopg.connect(cluster.dsn, autocommit=True))
            conn.execute("CREATE TABLE sent (id bigint GENERATED ALWAYS AS IDENTITY, data text)")
            conns[method] = conn
        for _ in range(args.commits):
            for method, conn in conns.items():
                began = time.perf_counter()
                conn.execute("INSERT INTO sent (data) VALUES ('x')")
                took[method].append(time.perf_counter() - began)
    for method, samples in took.items():
        samples.sort()
        p99 = samples[min(len(samples) - 1, round(0.99 * len(samples)))]
        p50 = statistics.median(samples)
        print(f"{method:24} p50 {p50 * 1e3:6.2f} ms  p99 {p99 * 1e3:6.2f} ms")


if __name__ == "__main__":
    main()
