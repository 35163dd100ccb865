"""The postgres engine's test hooks: the only way the conformance suite reaches its tables."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ...core.plans import Plan, Row, Statement, Steps, single
from ...core.records import as_int
from .identifiers import quote_ident
from .runtime import MAINTENANCE
from .sql import LATEST_TIME, seconds_after

T = TypeVar("T")

TIMESTAMP_COLUMNS = (
    "created_on",
    "start_after",
    "started_on",
    "completed_on",
    "heartbeat_on",
    "keep_until",
)
JOB_FIELDS = (
    "id, name, state, priority, retry_count, retry_limit, expire_seconds, heartbeat_seconds, "
    "retention_seconds, deletion_seconds, data::text AS data, output::text AS output, "
    "source_queue, source_id, source_retry_count, trace_context::text AS trace_context, "
    "errors::text AS errors"
)


class PostgresTestHooks:
    """Test-only plans on one schema of the postgres table layout."""

    def __init__(
        self,
        s: str,
        *,
        retry_serialization: bool,
        on_plan: Callable[[], None] | None = None,
    ) -> None:
        self.s = s
        """The quoted schema."""
        self.retry = retry_serialization
        self.on_plan = on_plan
        """Called as each plan is built: these plans move jobs and time (the engine's
        claims then walk their queues from the head: claim_marks.py)."""

    def _single(
        self, name: str, sql: str, params: tuple[Any, ...], result: Callable[[list[Row]], T]
    ) -> Plan[T]:
        if self.on_plan is not None:
            self.on_plan()
        statement = Statement(sql, params)
        return single(name, statement, result, retry_serialization=self.retry)

    def _plan(self, name: str, steps: Callable[[], Steps[T]]) -> Plan[T]:
        if self.on_plan is not None:
            self.on_plan()
        return Plan(name, steps, transaction=True, retry_serialization=self.retry)

    def advance(self, seconds: float) -> Plan[None]:
        """Shift every stored timestamp back by ``seconds``: for the store, time passed."""
        # IMMUTABLE arithmetic, which sharded Citus accepts on columns (see seconds_after).
        # A throttled job's slot too: time passing moves it into an earlier slot.
        shifted = (*TIMESTAMP_COLUMNS, "singleton_on")
        shift = ", ".join(f"{c} = {seconds_after(c, '-$1::float8')}" for c in shifted)
        # Schedules too: a slot that was due later is due now.
        slots = ", ".join(
            f"{c} = {seconds_after(c, '-$1::float8')}" for c in ("created_on", "last_slot")
        )
        params = (float(seconds),)

        def steps() -> Steps[None]:
            yield Statement(f"UPDATE {self.s}.job SET {shift}", params)
            yield Statement(f"UPDATE {self.s}.schedule SET {slots}", params)

        return self._plan("test-advance", steps)

    def job_rows(self) -> Plan[list[Row]]:
        """Every job, each timestamp as its age in seconds on the server's clock."""
        ages = ", ".join(
            f"extract(epoch FROM now() - CASE WHEN {c} = 'infinity' THEN {LATEST_TIME} "
            f"ELSE {c} END)::float8 AS {c}"
            for c in TIMESTAMP_COLUMNS
        )
        sql = f"SELECT {JOB_FIELDS}, {ages} FROM {self.s}.job"
        # As dicts on every driver, as the memory engine's: a test compares or prints them.
        return self._single("test-job-rows", sql, (), lambda rows: [dict(r.items()) for r in rows])

    def set_job_columns(
        self, queue: str, job_id: uuid.UUID, values: Mapping[str, int | bool | dt.datetime | None]
    ) -> Plan[int]:
        """Store ``values`` in columns of one job as they are, past validation."""
        names = list(values)
        sets = ", ".join(f"{quote_ident(c)} = ${n}" for n, c in enumerate(names, 3))
        sql = f"UPDATE {self.s}.job SET {sets} WHERE name = $1 AND id = $2 RETURNING id"
        params = (queue, job_id, *(values[c] for c in names))
        return self._single("test-set-job-columns", sql, params, len)

    def job_count(self) -> Plan[int]:
        """How many jobs the schema holds."""
        sql = f"SELECT count(*) AS n FROM {self.s}.job"
        return self._single("test-job-count", sql, (), lambda rows: as_int(rows[0]["n"]))

    def reset(self) -> Plan[None]:
        """Return the schema to its just-installed state: drop the queues' partitions, delete
        every job, dependency and queue (their schedules and subscriptions go with them), the
        counters and their watermark, make the supervisor's maintenance pass due, unclaimed,
        and forget the processes' records."""
        s = self.s

        def steps() -> Steps[None]:
            rows = yield Statement(f"SELECT table_name FROM {s}.queue WHERE partition")
            for row in rows:
                yield Statement(f"DROP TABLE {s}.{quote_ident(row['table_name'])}")
            yield Statement(f"DELETE FROM {s}.job")
            yield Statement(f"DELETE FROM {s}.job_dependency")
            yield Statement(f"DELETE FROM {s}.job_blocked")
            yield Statement(f"DELETE FROM {s}.queue")
            yield Statement(f"DELETE FROM {s}.queue_counter")
            yield Statement(f"UPDATE {s}.version SET counted_until = NULL")
            yield Statement(
                f"UPDATE {s}.supervisor SET next_on = now(), run_on = NULL, owner = NULL "
                "WHERE name = $1",
                (MAINTENANCE,),
            )
            yield Statement(f"DELETE FROM {s}.supervisor WHERE name <> $1", (MAINTENANCE,))

        return self._plan("test-reset", steps)

    def drop(self) -> Plan[None]:
        """Drop the schema with everything in it."""
        return self._single("test-drop", f"DROP SCHEMA {self.s} CASCADE", (), lambda _r: None)

    def version_records(self) -> Plan[int]:
        """How many rows the version table holds."""
        sql = f"SELECT count(*) AS n FROM {self.s}.version"
        return self._single("test-version-records", sql, (), lambda rows: as_int(rows[0]["n"]))

    def set_version(self, version: int) -> Plan[None]:
        """Record ``version`` as installed."""
        sql = f"UPDATE {self.s}.version SET version = $1::int"
        return self._single("test-set-version", sql, (version,), lambda _rows: None)

    def job_storage(self) -> Plan[dict[str, int]]:
        """Each partition of the job table (or the table itself) -> its job count."""
        s = self.s

        def steps() -> Steps[dict[str, int]]:
            parts = yield Statement(
                "SELECT c.relname AS part FROM pg_inherits i "
                "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::text::regclass",
                (f"{s}.job",),
            )
            counts = yield Statement(
                f"SELECT c.relname AS part, count(*) AS n FROM {s}.job j "
                "JOIN pg_class c ON c.oid = j.tableoid GROUP BY c.relname"
            )
            found = {str(r["part"]): 0 for r in parts} or {"job": 0}
            return found | {str(r["part"]): as_int(r["n"]) for r in counts}

        return self._plan("test-job-storage", steps)
