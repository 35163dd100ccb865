"""The raw-SQL ceiling: the same drain as two bare prepared statements per batch.

A minimal jobs table (bigint identity id, state, jsonb data, a partial index on queued ids);
a claim ``UPDATE … WHERE id IN (SELECT id … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING id,
data`` and a complete ``UPDATE … WHERE id = ANY(ids)``, each prepared, on psycopg connections
opened before the clock starts (one per consumer). The claim returns each job's payload, as
every queue in the comparison must hand it to its consumer; nothing else a job queue does
(retries, expiry, options, fencing, full job records) is done, which makes it a ceiling.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg

from ...engines.postgres.identifiers import quote_schema
from ..drain import numbered_batches
from ..loops import Tally, run_threads, tracked
from ..measure import cpu_window, local_postmaster, peak_rss_bytes, reset_peak_rss
from ..progress import Progress
from ..results import DrainResult
from ..server import create_schema, drop_schema, prepare_drain
from .spec import DrainSpec

NAME = "raw-sql"


def unavailable() -> str | None:
    """Always available: psycopg is what the harness itself uses."""
    return None


def versions() -> dict[str, object]:
    """Nothing beyond psycopg, which the fingerprint already records."""
    return {}


class Statements:
    """The SQL of the ceiling, for one schema."""

    def __init__(self, schema: str) -> None:
        s = quote_schema(schema)
        self.create: tuple[str, ...] = (
            f"""CREATE TABLE {s}.job (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                state text NOT NULL DEFAULT 'queued',
                data jsonb)""",
            f"CREATE INDEX job_queued ON {s}.job (id) WHERE state = 'queued'",
        )
        # {s} is quoted by quote_schema; every value is a bound parameter.
        self.insert = f"INSERT INTO {s}.job (data) SELECT d::jsonb FROM unnest($1::text[]) d"
        self.claim = f"""UPDATE {s}.job SET state = 'active'
            WHERE id IN (SELECT id FROM {s}.job WHERE state = 'queued'
                         ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING id, data"""
        self.complete = f"UPDATE {s}.job SET state = 'completed' WHERE id = ANY($1::bigint[])"
        self.complete_all = f"UPDATE {s}.job SET state = 'completed' WHERE state = 'queued'"
        self.completed = f"SELECT count(*) FROM {s}.job WHERE state = 'completed'"

    def insert_params(self, data: list[str]) -> tuple[Any, ...]:
        """The parameters of :attr:`insert` for the payloads ``data``."""
        return (data,)


class Connections:
    """Connections opened up front, lent one per statement (a minimal pool)."""

    def __init__(self, dsn: str, count: int) -> None:
        self._all = [psycopg.Connection.connect(dsn, autocommit=True) for _ in range(count)]
        self._idle: queue.SimpleQueue[psycopg.Connection[Any]] = queue.SimpleQueue()
        for conn in self._all:
            self._idle.put(conn)

    @contextmanager
    def cursor(self) -> Iterator[psycopg.RawCursor[Any]]:
        """A raw cursor (``$n`` placeholders) on a borrowed connection."""
        conn = self._idle.get()
        try:
            with psycopg.RawCursor(conn) as cur:
                yield cur
        finally:
            self._idle.put(conn)

    def close(self) -> None:
        """Close every connection."""
        for conn in self._all:
            conn.close()


def _enqueue(pool: Connections, sql: Statements, jobs: int) -> float:
    began = time.perf_counter()
    for numbers in numbered_batches(jobs):
        data = [json.dumps({"n": n}) for n in numbers]
        with pool.cursor() as cur:
            cur.execute(sql.insert, sql.insert_params(data), prepare=True)
    return time.perf_counter() - began


Fetch = Callable[[int], Sequence[Any]]
"""A claim of up to n jobs, returning their ids."""


def claim_ids(pool: Connections, sql: Statements) -> Fetch:
    """The fetch that runs ``sql.claim`` with the batch size and returns the claimed ids."""

    def fetch(n: int) -> Sequence[Any]:
        with pool.cursor() as cur:
            cur.execute(sql.claim, (n,), prepare=True)
            return [row[0] for row in cur.fetchall()]  # the payload is read, then dropped

    return fetch


def drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """Pre-enqueue, warm up, and time the drain."""
    return drain_with(dsn, spec, schema, progress, NAME, Statements(schema), claim_ids)


S = TypeVar("S", bound=Statements)


def drain_with(
    dsn: str,
    spec: DrainSpec,
    schema: str,
    progress: Progress,
    name: str,
    sql: S,
    claim: Callable[[Connections, S], Fetch],
) -> DrainResult:
    """The ceiling's drain of peer ``name`` with the statements ``sql`` and the claim that
    ``claim`` makes of the pool and them."""
    create_schema(dsn, schema)
    pool = Connections(dsn, spec.pool_size)
    try:
        with pool.cursor() as cur:
            for ddl in sql.create:
                cur.execute(ddl)

        fetch = claim(pool, sql)

        def complete(ids: Sequence[Any]) -> None:
            with pool.cursor() as cur:
                cur.execute(sql.complete, (list(ids),), prepare=True)

        def loops(tally: Tally) -> Any:
            return run_threads(
                spec.consumers, spec.batch, fetch, complete, lambda i: i, tally, spec.timeout
            )

        _enqueue(pool, sql, spec.warmup)  # the warm-up jobs come first in id order
        loops(Tally(spec.warmup))
        enqueue_seconds = _enqueue(pool, sql, spec.jobs)
        prepare_drain(dsn, spec.variant)
        postmaster = local_postmaster(dsn)
        reset_peak_rss()
        cell = spec.cell(name, "psycopg")
        with cpu_window(postmaster) as cpu, tracked(progress, cell.description, spec.jobs) as tally:
            outcome = loops(tally)
        rss = peak_rss_bytes()
        with pool.cursor() as cur:
            cur.execute(sql.completed)
            completed = int(cur.fetchone()[0]) - spec.warmup  # type: ignore[index]
    finally:
        pool.close()
        drop_schema(dsn, schema)
    return DrainResult.from_outcome(
        cell, spec.jobs, outcome, completed, rss, enqueue_seconds, cpu=cpu
    )


__all__ = [
    "NAME",
    "Connections",
    "Fetch",
    "Statements",
    "claim_ids",
    "drain",
    "drain_with",
    "unavailable",
    "versions",
]
