"""``bench wal``: WAL bytes per job, alkstore beside the raw-SQL ceiling.

Per system and fetch batch size: ``jobs`` jobs sent in batches of 1,000 (``send``), then,
after ``VACUUM ANALYZE`` and a ``CHECKPOINT`` (the same preparation as the peers harness),
drained by one consumer that fetches ``batch`` jobs and completes them (``drain``: the
fetch + complete cycle). Each phase's figure is the WAL it wrote over ``jobs``, from
``pg_current_wal_insert_lsn()`` before and after: the position WAL has been generated to,
not the one written out, which lags behind asynchronous commits. Records and full-page
images come from ``pg_stat_wal`` (PostgreSQL 14+), which a backend adds its counts to only
when it goes idle at least a second after its last report, after 10 s idle, or when it
exits: so each phase opens its own connections, closes them, and the counters are read once
every backend the phase started has left. A full-page image is written for the
first change of each page after a checkpoint, so the figures depend on the checkpoint
spacing: both systems get the same. The throwaway server runs with ``autovacuum = off`` so
that no vacuum's WAL lands in a phase.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

import alkstore

from ..engines.postgres.identifiers import quote_schema
from .commands import Measured, Options, Table, run
from .drain import QUEUE, job_specs, numbered_batches, send_in_batches
from .peers.rawsql import Statements
from .report import BenchProgress, Column
from .server import Server, admin_connection, create_schema, drop_schema, prepare_drain

Row = dict[str, Any]

SERVER_SETTINGS = {"autovacuum": "off"}
"""Settings of the throwaway server (see the module docstring)."""

COLUMNS = (
    Column("system", "system", justify="left"),
    Column("batch", "batch"),
    Column("send_bytes_per_job", "send WAL B/job"),
    Column("drain_bytes_per_job", "fetch+complete WAL B/job"),
    Column("total_bytes_per_job", "total WAL B/job"),
    Column("drain_records_per_job", "fetch+complete records/job", 1),
    Column("drain_fpi_per_job", "fetch+complete FPI/job", 2),
    Column("ratio", "total / raw SQL", 2),
)

SCHEMA = "alkstore_wal"


class _Wal:
    """WAL position and counters of the server, read on one admin connection."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn

    def read(self) -> tuple[int, int | None, int | None]:
        with admin_connection(self._dsn) as conn:
            lsn = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
            try:
                stat = conn.execute("SELECT wal_records, wal_fpi FROM pg_stat_wal").fetchone()
            except Exception:  # pg_stat_wal is PostgreSQL 14+; the bytes suffice
                stat = None
        assert lsn is not None
        records, fpi = (int(stat[0]), int(stat[1])) if stat else (None, None)
        return int(lsn[0]), records, fpi


def _phase(dsn: str, action: Callable[[], None]) -> tuple[int, int | None, int | None]:
    wal = _Wal(dsn)
    present = _client_backends(dsn)
    before = wal.read()
    action()
    _await_exit(dsn, present)
    after = wal.read()
    records = None if after[1] is None or before[1] is None else after[1] - before[1]
    fpi = None if after[2] is None or before[2] is None else after[2] - before[2]
    return after[0] - before[0], records, fpi


EXIT_DEADLINE = 30.0
"""Seconds a phase's closed connections get to leave the server (see :func:`_await_exit`)."""


def _client_backends(dsn: str) -> set[int]:
    with admin_connection(dsn) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
    return {int(row[0]) for row in rows}


def _await_exit(dsn: str, present: set[int]) -> None:
    """Wait until every client backend started since ``present`` was taken has exited.

    A backend reports its WAL counters before it leaves ``pg_stat_activity``, so once the
    phase's backends are gone ``pg_stat_wal`` holds all they wrote.
    """
    deadline = time.monotonic() + EXIT_DEADLINE
    while left := _client_backends(dsn) - present:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"backends {sorted(left)} of a WAL phase were still connected after "
                f"{EXIT_DEADLINE:.0f} s"
            )
        time.sleep(0.02)


def _alkstore(dsn: str, jobs: int, batch: int) -> tuple[Callable[[], None], Callable[[], None]]:
    drop_schema(dsn, SCHEMA)
    with alkstore.connect(dsn, schema=SCHEMA, pool_size=1) as store:
        store.create_queue(QUEUE)

    def send() -> None:
        with alkstore.connect(dsn, schema=SCHEMA, pool_size=1, migrate=False) as store:
            send_in_batches(lambda specs: store.send_many(QUEUE, specs), jobs)

    def drain() -> None:
        with alkstore.connect(dsn, schema=SCHEMA, pool_size=1, migrate=False) as store:
            while jobs_ := store.fetch(QUEUE, batch_size=batch):
                store.complete(QUEUE, jobs_)

    return send, drain


def _raw(dsn: str, jobs: int, batch: int) -> tuple[Callable[[], None], Callable[[], None]]:
    create_schema(dsn, SCHEMA)
    sql = Statements(SCHEMA)
    with admin_connection(dsn) as conn:
        for statement in sql.create:
            conn.execute(statement)

    def execute(
        conn: psycopg.Connection[Any], statement: str, params: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        with psycopg.RawCursor(conn) as raw:
            raw.execute(statement, params, prepare=True)
            return raw.fetchall() if raw.description else []

    def send() -> None:
        with admin_connection(dsn) as conn:
            for numbers in numbered_batches(jobs):
                payloads = [json.dumps(s["data"]) for s in job_specs(numbers.start, len(numbers))]
                execute(conn, sql.insert, [payloads])

    def drain() -> None:
        with admin_connection(dsn) as conn:
            while claimed := execute(conn, sql.claim, [batch]):
                execute(conn, sql.complete, [[row[0] for row in claimed]])

    return send, drain


SYSTEMS: dict[str, Callable[[str, int, int], tuple[Callable[[], None], Callable[[], None]]]] = {
    "alkstore": _alkstore,
    "raw-sql": _raw,
}


def wal_cell(dsn: str, system: str, jobs: int, batch: int) -> Row:
    """One system at one batch size: WAL per job of the send and of the drain."""
    send, drain = SYSTEMS[system](dsn, jobs, batch)
    sent = _phase(dsn, send)
    prepare_drain(dsn)
    drained = _phase(dsn, drain)
    drop_schema(dsn, SCHEMA)
    return {
        "system": system,
        "batch": batch,
        "jobs": jobs,
        "send_bytes_per_job": sent[0] / jobs,
        "drain_bytes_per_job": drained[0] / jobs,
        "total_bytes_per_job": (sent[0] + drained[0]) / jobs,
        "send_records_per_job": None if sent[1] is None else sent[1] / jobs,
        "drain_records_per_job": None if drained[1] is None else drained[1] / jobs,
        "send_fpi_per_job": None if sent[2] is None else sent[2] / jobs,
        "drain_fpi_per_job": None if drained[2] is None else drained[2] / jobs,
    }


def _with_ratios(rows: list[Row]) -> list[Row]:
    ceiling = {r["batch"]: r["total_bytes_per_job"] for r in rows if r["system"] == "raw-sql"}
    return [
        {**r, "ratio": r["total_bytes_per_job"] / ceiling[r["batch"]]}
        if ceiling.get(r["batch"])
        else r
        for r in rows
    ]


def wal(options: Options, *, jobs: int, batches: Sequence[int]) -> dict[str, Any]:
    """``bench wal``: WAL bytes per job of alkstore and of the raw-SQL ceiling."""
    options = Options(
        dsn=options.dsn,
        json_path=options.json_path,
        server_settings={**SERVER_SETTINGS, **options.server_settings},
        timeout=options.timeout,
        progress=options.progress,
        pg_version=options.pg_version,
    )
    quote_schema(SCHEMA)

    def measure(server: Server, progress: BenchProgress) -> Measured:
        rows = _with_ratios(
            [wal_cell(server.dsn, system, jobs, b) for b in batches for system in SYSTEMS]
        )
        notes = [
            f"{jobs:,} jobs sent 1,000 a batch, then VACUUM ANALYZE + CHECKPOINT, then drained "
            "by one consumer (fetch `batch`, complete them); WAL from pg_current_wal_insert_lsn(), "
            "records and full-page images (FPI) from pg_stat_wal; autovacuum off"
        ]
        table = Table(f"WAL per job: {jobs:,} jobs", COLUMNS, rows, notes)
        return Measured({"results": rows}, [table])

    return run("wal", options, {"jobs": jobs, "batches": list(batches)}, measure)
