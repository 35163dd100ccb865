"""The PostgreSQL engine: the SQL of every operation, written against capabilities.

Derived engines (CockroachDB, YugabyteDB, Citus, PGlite) subclass :class:`PostgresEngine`,
declare their :class:`~alkstore.core.capabilities.Capabilities` and override only the few
statements that differ. Every builder below branches on a capability, never on a name.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from ...core.capabilities import Capabilities
from ...core.errors import (
    JobConflict,
    QueueExists,
    QueueInUse,
    QueueNotFound,
    SchemaVersionError,
    UnsupportedByEngine,
)
from ...core.options import NewJob, QueueOptions
from ...core.plans import ErrorMap, Isolation, Plan, Row, Statement, Steps, rowcount, single
from ...core.records import Handoff, Job, Queue, QueueStats, as_int
from ...core.states import FINISHED, QUEUED, UNFINISHED, JobState
from ...core.targets import Targets
from .identifiers import partition_table, quote_ident, quote_schema
from .runtime import notifying
from .schema import LATEST, MIGRATIONS, in_list

T = TypeVar("T")

JOB_COLUMNS = (
    "id, name, data::text AS data, state, priority, retry_count, retry_limit, retry_delay, "
    "retry_backoff, retry_delay_max, expire_seconds, heartbeat_seconds, retention_seconds, "
    "deletion_seconds, singleton_key, group_id, group_tier, start_after, created_on, "
    "started_on, completed_on, heartbeat_on, keep_until, output::text AS output, "
    "source_queue, source_id, source_retry_count"
)
RETURNED_JOB_COLUMNS = ", ".join("j." + c.strip() for c in JOB_COLUMNS.split(","))
""":data:`JOB_COLUMNS` of the job table aliased ``j`` (in ``RETURNING`` lists)."""
QUEUE_COLUMNS = (
    "name, policy, retry_limit, retry_delay, retry_backoff, retry_delay_max, expire_seconds, "
    "heartbeat_seconds, retention_seconds, deletion_seconds, dead_letter, partition, "
    "created_on, updated_on"
)
SESSION_SETUP = (
    # Timestamps then arrive in UTC already, and the records keep them as they are.
    "SET TimeZone TO 'UTC'",
    # Until ANALYZE has seen a burst of new jobs, the planner guesses that a queue holds a
    # handful of them and claims through a bitmap scan plus a sort of the whole queue
    # (100,000 jobs: 240 ms a fetch instead of 1 ms). Without bitmap scans the only cheap
    # plan left is the ordered walk of the job_fetch index. pg_settings filters the setting
    # out on servers that do not have it.
    "SELECT set_config(name, 'off', false) FROM pg_settings WHERE name = 'enable_bitmapscan'",
)
"""What :attr:`PostgresEngine.session_setup` runs."""
TIMED_OUT = json.dumps({"message": "job timed out"})
HEARTBEAT_TIMED_OUT = json.dumps({"message": "heartbeat timed out"})

# The retry delay in seconds, spec §4 (engines compute it in SQL within the core's bounds).
RETRY_DELAY_SQL = """(CASE WHEN j.retry_backoff THEN
      CASE WHEN j.retry_delay_max IS NULL THEN {raw}
           ELSE LEAST(j.retry_delay_max::float8, {raw}) END
    ELSE j.retry_delay::float8 END)""".format(
    raw="GREATEST(j.retry_delay, 1)::float8 * power(2::float8, LEAST(16, j.retry_count)) "
    "* (1 + random())"
)
WILL_RETRY = "j.retry_count < j.retry_limit"


def _fence(alias: str = "t") -> str:
    """Join condition of a target row: a bare id, or an id fenced to one attempt.

    Every fetch after a job's first raises its ``retry_count``, so within the active state
    ``(id, retry_count)`` names exactly one attempt (the attempt's ``started_on`` adds
    nothing, and binding it would cost a timestamp array per call).
    """
    return (
        f"j.id = {alias}.id AND ({alias}.retry_count IS NULL OR "
        f"j.retry_count = {alias}.retry_count)"
    )


def _targets_sql(first: int) -> str:
    """``unnest`` of the two target arrays bound at ``$first`` and ``$first+1``."""
    return f"unnest(${first}::uuid[], ${first + 1}::int[]) AS t(id, retry_count)"


SEND_OPTION_SQL: dict[str, tuple[str, str]] = {
    "priority": ("int", "0"),
    "retry_limit": ("int", "q.retry_limit"),
    "retry_delay": ("int", "q.retry_delay"),
    "retry_backoff": ("bool", "q.retry_backoff"),
    "retry_delay_max": ("int", "q.retry_delay_max"),
    "expire_seconds": ("int", "q.expire_seconds"),
    "heartbeat_seconds": ("int", "q.heartbeat_seconds"),
    "retention_seconds": ("int", "q.retention_seconds"),
    "deletion_seconds": ("int", "q.deletion_seconds"),
    "singleton_key": ("text", "NULL"),
    "group_id": ("text", "NULL"),
    "group_tier": ("text", "NULL"),
}
"""Job option -> (SQL type, value when the job leaves it unset): job > queue > default."""
SEND_TYPES = {
    "id": "uuid",
    "data": "text",
    "start_at": "timestamptz",
    "delay": "float8",
    **{name: sql_type for name, (sql_type, _default) in SEND_OPTION_SQL.items()},
}
"""SQL element type of every array ``send`` may bind."""

COPIED_COLUMNS = ("name", "id", "state", "priority", "retry_count", "data", "output", "dead_letter")
"""Columns of a failed job that the split-statement path binds into its dead-letter copy."""
INT_COLUMNS = frozenset({"priority", "retry_count"})
RECLAIM_ROUNDS = 3
"""How many more claims a ctid claim makes for rows it locked but could not re-find."""


def _columns(rows: Sequence[Row], names: Sequence[str]) -> tuple[list[Any], ...]:
    """Rows read back, as one array per column to bind again (integers coerced: CockroachDB
    may have sent them as text, and asyncpg binds only ints into ``int[]``)."""
    return tuple([as_int(r[n]) if n in INT_COLUMNS else r[n] for r in rows] for n in names)


def _count(rows: Sequence[Row]) -> int:
    """Result mapper of a statement that returns ``count(*) AS n``."""
    return as_int(rows[0]["n"])


def _target_params(targets: Targets) -> tuple[Any, ...]:
    return (targets.ids, targets.retry_counts)


class PostgresEngine:
    """Stock PostgreSQL: every capability but serialization retries and a single connection."""

    name: ClassVar[str] = "postgres"
    capabilities: ClassVar[Capabilities] = Capabilities()
    isolation: ClassVar[Isolation | None] = None
    """Isolation every transaction of this engine runs at (None: the server default)."""
    emulation_profile: ClassVar[str | None] = None
    """The guard profile that emulates this engine's server on stock PostgreSQL, if any."""
    session_setup: ClassVar[tuple[str, ...]] = SESSION_SETUP
    """Statements run on every connection the store opens (never on a caller's)."""

    def __init__(self, schema: str = "alkstore", *, emulated: bool = False) -> None:
        self.schema = schema
        self.s = quote_schema(schema)
        self.emulated = emulated
        """Running on stock PostgreSQL behind this engine's emulation guard."""

    def after_install(self) -> list[Statement]:
        """Statements run right after a fresh install, in the same transaction."""
        return []

    # -- helpers ---------------------------------------------------------------------------

    def _plan(self, name: str, steps: Any, *, transaction: bool = False, **kw: Any) -> Plan[Any]:
        caps = self.capabilities
        return Plan(
            name,
            steps,
            transaction=transaction,
            isolation=self.isolation if transaction else None,
            retry_serialization=caps.serialization_retries,
            **kw,
        )

    def _single(
        self,
        name: str,
        sql: str,
        params: Sequence[Any],
        result: Callable[[list[Row]], T],
        **kw: Any,
    ) -> Plan[T]:
        caps = self.capabilities
        return single(
            name,
            Statement(sql, tuple(params)),
            result,
            retry_serialization=caps.serialization_retries,
            **kw,
        )

    def _require(self, capability: str, what: str) -> None:
        if not getattr(self.capabilities, capability):
            raise UnsupportedByEngine(self.name, capability, what)

    def _require_queue(self, name: str, field: str = "queue") -> Steps[None]:
        found = yield Statement(f"SELECT 1 AS found FROM {self.s}.queue WHERE name = $1", (name,))
        if not found:
            raise QueueNotFound(name, field=field)

    def _lock_key(self) -> int:
        digest = hashlib.sha256(f"alkstore.migrate.{self.schema}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    # -- schema ----------------------------------------------------------------------------

    def migrate(self, target: int = LATEST) -> list[Plan[Any]]:
        """Plans that install or upgrade the schema to ``target``, to run in order.

        The last plan returns the version now installed. It runs in one transaction that
        first takes the migration lock, so when many processes start together exactly one
        migrates and the rest wait, then find the work done. The lock is an advisory lock
        where the engine has them, else a claim row (an ``UPDATE`` of the row of a lock table
        that an untransacted bootstrap plan creates, tolerating a concurrent creator).
        """
        s = self.s
        plans: list[Plan[Any]] = []
        if not self.capabilities.advisory_locks:
            plans.append(self._plan("migrate-bootstrap", self._claim_row_bootstrap))

        def steps() -> Steps[int]:
            if self.capabilities.advisory_locks:
                yield Statement("SELECT pg_advisory_xact_lock($1::bigint)", (self._lock_key(),))
                yield Statement(f"CREATE SCHEMA IF NOT EXISTS {s}")
            else:
                # An UPDATE, not SELECT … FOR UPDATE: under REPEATABLE READ or SERIALIZABLE the
                # waiter then fails with 40001 once the winner commits, and its retry starts
                # a fresh snapshot that sees the installed schema.
                yield Statement(
                    f"UPDATE {s}.migration_lock SET claimed_on = now() WHERE name = 'migrate'"
                )
            current = yield from self._read_version()
            if current is not None and current > target:
                raise SchemaVersionError(
                    f"schema {self.schema!r} is at version {current}, newer than this "
                    f"library's {target}: upgrade alkstore"
                )
            for version in range((current or 0) + 1, target + 1):
                for ddl in MIGRATIONS[version](s, self.capabilities):
                    yield Statement(ddl)
            if current is None:
                yield from self.after_install()
                yield Statement(f"INSERT INTO {s}.version (version) VALUES ($1)", (target,))
            elif target > current:
                yield Statement(f"UPDATE {s}.version SET version = $1", (target,))
            return target

        plans.append(self._plan("migrate", steps, transaction=True))
        return plans

    def _claim_row_bootstrap(self) -> Steps[None]:
        # Concurrent "IF NOT EXISTS" creators can still collide on the catalog's unique
        # indexes (23505), or find the table's row type already made by the winner (42710);
        # the loser's error only means the object now exists.
        exists = frozenset({"23505", "42710", "42P06", "42P07"})
        s = self.s
        yield Statement(f"CREATE SCHEMA IF NOT EXISTS {s}", tolerate=exists)
        yield Statement(
            f"CREATE TABLE IF NOT EXISTS {s}.migration_lock "
            "(name text PRIMARY KEY, claimed_on timestamptz)",
            tolerate=exists,
        )
        yield Statement(
            f"INSERT INTO {s}.migration_lock (name) VALUES ('migrate') ON CONFLICT DO NOTHING"
        )

    def _read_version(self) -> Steps[int | None]:
        rows = yield Statement(
            "SELECT to_regclass($1::text) IS NOT NULL AS installed", (f"{self.s}.version",)
        )
        if not rows[0]["installed"]:
            return None
        rows = yield Statement(f"SELECT version FROM {self.s}.version")
        return as_int(rows[0]["version"]) if rows else None

    def schema_version(self) -> Plan[int | None]:
        """The version recorded in the database (None when nothing is installed)."""
        return self._plan("schema_version", self._read_version)

    def check_version(self) -> Plan[int | None]:
        """Like :meth:`schema_version`, but refuses a database newer than this library."""

        def steps() -> Steps[int | None]:
            current = yield from self._read_version()
            if current is not None and current > LATEST:
                raise SchemaVersionError(
                    f"schema {self.schema!r} is at version {current}, newer than this "
                    f"library's {LATEST}: upgrade alkstore"
                )
            return current

        return self._plan("check_version", steps)

    # -- queues ----------------------------------------------------------------------------

    def _queue_errors(self, name: str, options: QueueOptions) -> ErrorMap:
        def map_error(sqlstate: str | None, constraint: str | None) -> Exception | None:
            if sqlstate == "23505" and constraint == "queue_pkey":
                return QueueExists(name)
            if sqlstate == "23503" and constraint == "queue_dead_letter_fkey":
                return QueueNotFound(options.dead_letter or "", field="dead_letter")
            return None

        return map_error

    def create_queue(self, name: str, options: QueueOptions) -> Plan[None]:
        """Create a queue; with ``partition=True`` it gets its own partition."""
        options.check_dead_letter(name)
        if options.partition:
            self._require("table_partitioning", "partition=True")
            self._require("plpgsql", "partition=True")
        s = self.s
        table = partition_table(name) if options.partition else None

        def steps() -> Steps[None]:
            yield Statement(
                f"""INSERT INTO {s}.queue (name, policy, retry_limit, retry_delay, retry_backoff,
                    retry_delay_max, expire_seconds, heartbeat_seconds, retention_seconds,
                    deletion_seconds, dead_letter, partition, table_name)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)""",
                (
                    name,
                    options.policy.value,
                    options.retry_limit,
                    options.retry_delay,
                    options.retry_backoff,
                    options.retry_delay_max,
                    options.expire_seconds,
                    options.heartbeat_seconds,
                    options.retention_seconds,
                    options.deletion_seconds,
                    options.dead_letter,
                    options.partition,
                    table,
                ),
            )
            if table is not None:
                yield Statement(
                    f"SELECT {s}.create_queue_partition($1::text, $2::text, $3::text)",
                    (self.schema, name, table),
                )

        return self._plan(
            "create_queue",
            steps,
            transaction=options.partition,
            map_error=self._queue_errors(name, options),
        )

    def update_queue(self, name: str, changes: dict[str, Any]) -> Plan[Queue]:
        """Change a queue's settings (not ``policy`` or ``partition``); returns the new queue."""
        s = self.s

        def steps() -> Steps[Queue]:
            rows = yield Statement(
                f"SELECT {QUEUE_COLUMNS} FROM {s}.queue WHERE name = $1 FOR UPDATE", (name,)
            )
            if not rows:
                raise QueueNotFound(name)
            new = Queue.from_row(rows[0]).options.updated(changes)
            new.check_dead_letter(name)
            rows = yield Statement(
                f"""UPDATE {s}.queue SET retry_limit = $2, retry_delay = $3, retry_backoff = $4,
                    retry_delay_max = $5, expire_seconds = $6, heartbeat_seconds = $7,
                    retention_seconds = $8, deletion_seconds = $9, dead_letter = $10,
                    updated_on = now()
                WHERE name = $1 RETURNING {QUEUE_COLUMNS}""",
                (
                    name,
                    new.retry_limit,
                    new.retry_delay,
                    new.retry_backoff,
                    new.retry_delay_max,
                    new.expire_seconds,
                    new.heartbeat_seconds,
                    new.retention_seconds,
                    new.deletion_seconds,
                    new.dead_letter,
                ),
            )
            return Queue.from_row(rows[0])

        dead_letter = changes.get("dead_letter")
        errors = self._queue_errors(name, QueueOptions(dead_letter=dead_letter))
        return self._plan("update_queue", steps, transaction=True, map_error=errors)

    def delete_queue(self, name: str) -> Plan[None]:
        """Delete a queue and all its jobs (refused while another queue dead-letters into it).

        The queue row is locked first, so a concurrent ``send`` either commits before the jobs
        are deleted or finds no queue.
        """
        s = self.s

        def steps() -> Steps[None]:
            rows = yield Statement(
                f"SELECT table_name FROM {s}.queue WHERE name = $1 FOR UPDATE", (name,)
            )
            if not rows:
                raise QueueNotFound(name)
            table = rows[0]["table_name"]
            users = yield Statement(
                f"SELECT name FROM {s}.queue WHERE dead_letter = $1 ORDER BY name", (name,)
            )
            if users:
                raise QueueInUse(
                    f"queue {name!r} is the dead-letter queue of "
                    f"{', '.join(repr(r['name']) for r in users)}"
                )
            if table is not None:
                yield Statement(f"DROP TABLE {s}.{quote_ident(table)}")
            else:
                yield Statement(f"DELETE FROM {s}.job WHERE name = $1", (name,))
            yield Statement(f"DELETE FROM {s}.queue WHERE name = $1", (name,))

        return self._plan("delete_queue", steps, transaction=True)

    def get_queue(self, name: str) -> Plan[Queue | None]:
        """The queue called ``name``, or None."""
        return self._single(
            "get_queue",
            f"SELECT {QUEUE_COLUMNS} FROM {self.s}.queue WHERE name = $1",
            (name,),
            lambda rows: Queue.from_row(rows[0]) if rows else None,
        )

    def queues(self) -> Plan[list[Queue]]:
        """Every queue, by name."""
        return self._single(
            "queues",
            f"SELECT {QUEUE_COLUMNS} FROM {self.s}.queue ORDER BY name",
            (),
            lambda rows: [Queue.from_row(r) for r in rows],
        )

    def queue_stats(self, name: str) -> Plan[QueueStats]:
        """Counts per state, and how long the oldest fetchable queued job has waited."""
        s = self.s

        def steps() -> Steps[QueueStats]:
            yield from self._require_queue(name)
            rows = yield Statement(
                f"""SELECT state, count(*) AS n,
                       extract(epoch FROM now() - min(start_after)
                               FILTER (WHERE start_after <= now()))::float8 AS waited
                FROM {s}.job WHERE name = $1 GROUP BY state""",
                (name,),
            )
            counts = dict.fromkeys(JobState, 0)
            waited: list[float] = []
            for row in rows:
                state = JobState(row["state"])
                counts[state] = as_int(row["n"])
                if state in QUEUED and row["waited"] is not None:
                    waited.append(float(row["waited"]))
            oldest = dt.timedelta(seconds=max(waited)) if waited else None
            return QueueStats(name, counts, oldest)

        return self._plan("queue_stats", steps)

    # -- sending ---------------------------------------------------------------------------

    def send(self, queue: str, jobs: Sequence[NewJob]) -> Plan[list[uuid.UUID]]:
        """Insert ``jobs`` (ids already assigned) in one statement, options resolved in SQL.

        Raises :class:`QueueNotFound` when the queue does not exist and :class:`JobConflict`
        on a duplicate id; either way nothing is written.
        """
        sql, params = notifying(self, *self._send_statement(queue, jobs), "$1::text")
        ids = [job.id for job in jobs]
        if len(ids) != len(set(ids)):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise JobConflict(f"id {dup} appears twice in one send")

        def steps() -> Steps[list[uuid.UUID]]:
            rows = yield Statement(sql, params)
            if len(rows) < len(jobs):
                yield from self._require_queue(queue)
            return ids

        def map_error(sqlstate: str | None, constraint: str | None) -> Exception | None:
            if sqlstate == "23505" and constraint is not None and constraint.startswith("j"):
                return JobConflict(f"a job with one of these ids already exists in {queue!r}")
            return None

        return self._plan("send", steps, map_error=map_error)

    def _send_statement(self, queue: str, jobs: Sequence[NewJob]) -> tuple[str, tuple[Any, ...]]:
        """The INSERT of ``send``, binding only the option arrays some job sets.

        An option no job sets comes straight from the queue row (or its constant default), so
        a large batch without options binds two arrays instead of sixteen.
        """
        options = [job.options for job in jobs]
        # Jobs sent without options share one JobOptions object: look at each object once.
        distinct = {id(o): o for o in options}.values()
        bound = [
            name for name in SEND_OPTION_SQL if any(getattr(o, name) is not None for o in distinct)
        ]
        timed = any(o.start_after is not None for o in distinct)
        arrays: dict[str, list[Any]] = {
            "id": [job.id for job in jobs],
            "data": [job.data_json for job in jobs],
        }
        for name in bound:
            arrays[name] = [getattr(o, name) for o in options]
        if timed:
            arrays["start_at"] = [
                o.start_after if isinstance(o.start_after, dt.datetime) else None for o in options
            ]
            arrays["delay"] = [
                o.start_after if isinstance(o.start_after, float) else None for o in options
            ]
        values = {
            name: f"coalesce(t.{name}, {default})" if name in bound else default
            for name, (_type, default) in SEND_OPTION_SQL.items()
        }
        start = (
            "coalesce(t.start_at, now() + coalesce(t.delay, 0) * interval '1 second')"
            if timed
            else "now()"
        )
        unnest = ", ".join(f"${i + 2}::{SEND_TYPES[n]}[]" for i, n in enumerate(arrays))
        sql = f"""
            INSERT INTO {self.s}.job (id, name, data, {", ".join(SEND_OPTION_SQL)},
                policy, start_after, keep_until)
            SELECT t.id, q.name, t.data::jsonb, {", ".join(values.values())}, q.policy, sa.at,
                sa.at + {values["retention_seconds"]} * interval '1 second'
            FROM unnest({unnest}) AS t({", ".join(arrays)})
            JOIN {self.s}.queue q ON q.name = $1
            CROSS JOIN LATERAL (SELECT {start} AS at) sa
            RETURNING id"""
        return sql, (queue, *arrays.values())

    # -- fetching --------------------------------------------------------------------------

    def _claim(self, limit: str) -> tuple[str, str]:
        """The claim of queue ``$1``: the SELECT of at most ``limit`` queued jobs (to name
        ``next``) and the UPDATE of those rows that returns the claimed jobs."""
        s = self.s
        queued = in_list(QUEUED)
        caps = self.capabilities
        # The locked rows are re-found by ctid where that exists: a direct tuple fetch instead
        # of a primary-key descent per row (measured: 27 % of the server's time per job at
        # 100 a fetch). A ctid is unique within one partition, and only the partition of
        # queue $1 holds rows named $1, so "name = $1 AND ctid = ..." is one row.
        # Otherwise the join is on the whole key (name, id): with the name as "$1" the
        # planner may hash-join over every row of the queue, which under SERIALIZABLE takes
        # predicate locks on all of them (the emulated CockroachDB claim ran 20 x slower).
        key, join = (
            ("ctid", "j.name = $1 AND j.ctid = next.ctid")
            if self._claims_by_ctid
            else ("name, id", "j.name = next.name AND j.id = next.id")
        )
        pick = f"""SELECT {key} FROM {s}.job
                WHERE name = $1 AND state IN {queued} AND start_after <= now()
                ORDER BY priority DESC, created_on, id LIMIT {limit}"""
        if caps.skip_locked:
            pick += " FOR UPDATE SKIP LOCKED"
            recheck = ""
        else:
            # Without SKIP LOCKED two fetchers may pick the same rows; the recheck lets only
            # one of them claim each (the other gets fewer rows, never the same job).
            recheck = f" AND j.state IN {queued}"
        update = f"""UPDATE {s}.job j SET state = 'active', started_on = now(),
                heartbeat_on = CASE WHEN j.heartbeat_seconds IS NULL THEN NULL ELSE now() END,
                retry_count = CASE WHEN j.started_on IS NULL THEN j.retry_count
                                   ELSE j.retry_count + 1 END
            FROM next WHERE {join}{recheck}
            RETURNING {RETURNED_JOB_COLUMNS}"""
        return pick, update

    def _complete_update(self, targets_at: int, output: str) -> str:
        """The UPDATE of ``complete``: queue ``$1``, targets bound from ``$targets_at``."""
        return f"""UPDATE {self.s}.job j SET state = 'completed', completed_on = now(),
                output = {output}::text::jsonb
            FROM {_targets_sql(targets_at)}
            WHERE j.name = $1 AND j.state = 'active' AND {_fence()}
            RETURNING j.id"""

    # The hot statements are built once per engine: building them per call showed up in
    # the client's profile of one-job fetches.
    @property
    def _claims_by_ctid(self) -> bool:
        caps = self.capabilities
        return caps.tuple_ids and caps.skip_locked

    @functools.cached_property
    def _fetch_sql(self) -> str:
        pick, update = self._claim("$2")
        if not self._claims_by_ctid:
            return f"WITH next AS ({pick}) {update}"
        # A ctid claim also says how many rows it locked (see _claimed_jobs).
        return f"""WITH next AS ({pick}), claimed AS ({update})
            SELECT n.picked, c.*
            FROM (SELECT count(*) AS picked FROM next) n LEFT JOIN claimed c ON true"""

    @functools.cached_property
    def _complete_sql(self) -> str:
        # One count row instead of a row per completed job: a batch's ids are not read back.
        return f"WITH done AS ({self._complete_update(2, '$4')}) SELECT count(*) AS n FROM done"

    @functools.cached_property
    def _complete_and_fetch_sql(self) -> str:
        # The completed rows are active and the claimed ones queued, so the two changes
        # never touch the same row; the LEFT JOIN returns the count when nothing is claimed.
        pick, update = self._claim("$2")
        return f"""WITH done AS ({self._complete_update(3, "$5")}),
            next AS ({pick}), claimed AS ({update})
            SELECT d.completed, n.picked, c.*
            FROM (SELECT count(*) AS completed FROM done) d
            CROSS JOIN (SELECT count(*) AS picked FROM next) n
            LEFT JOIN claimed c ON true"""

    def _claimed_jobs(self, queue: str, rows: list[Row]) -> Steps[list[Job]]:
        """The claimed jobs of ``rows`` in fetch order (an empty claim checks the queue)."""
        jobs = [Job.from_row(r) for r in rows if r["id"] is not None]
        if self._claims_by_ctid:
            # A queued row that another transaction changed (still queued) after this
            # statement's snapshot is locked in its new version, which a ctid lookup under
            # the old snapshot cannot see: it stays queued, unclaimed. Claim that many again,
            # so that a fetch does not come back short while such jobs wait.
            missing = as_int(rows[0]["picked"]) - len(jobs)
            for _ in range(RECLAIM_ROUNDS):
                if missing <= 0:
                    break
                more = yield Statement(self._fetch_sql, (queue, missing))
                claimed = [Job.from_row(r) for r in more if r["id"] is not None]
                jobs += claimed
                missing = as_int(more[0]["picked"]) - len(claimed)
        if not jobs:
            # Only an empty fetch pays for telling "no jobs" from "no such queue".
            yield from self._require_queue(queue)
        jobs.sort(key=Job.sort_key)
        return jobs

    def fetch(self, queue: str, batch_size: int) -> Plan[list[Job]]:
        """Claim up to ``batch_size`` queued jobs whose time has come; returns them in order."""
        sql = self._fetch_sql

        def steps() -> Steps[list[Job]]:
            rows = yield Statement(sql, (queue, batch_size))
            return (yield from self._claimed_jobs(queue, rows))

        # A fetcher that keeps losing the claim race to others gets no jobs this time, like
        # one that found none; the jobs stay queued for the next fetch.
        return self._plan("fetch", steps, on_contention=list)

    # -- settling --------------------------------------------------------------------------

    def complete(self, queue: str, targets: Targets, output_json: str | None) -> Plan[int]:
        """active -> completed, storing ``output``."""
        params = (queue, *_target_params(targets), output_json)
        return self._single("complete", self._complete_sql, params, _count)

    def complete_and_fetch(
        self, queue: str, targets: Targets, output_json: str | None, batch_size: int
    ) -> Plan[Handoff] | None:
        """``complete`` then ``fetch`` in one statement; None where the engine cannot change
        the job table twice in one statement (run the two plans one after the other)."""
        if not self.capabilities.multi_mutation_cte:
            return None
        sql = self._complete_and_fetch_sql
        params = (queue, batch_size, *_target_params(targets), output_json)

        def steps() -> Steps[Handoff]:
            rows = yield Statement(sql, params)
            jobs = yield from self._claimed_jobs(queue, rows)
            return Handoff(as_int(rows[0]["completed"]), jobs)

        # No contention result: under contention the completion must not be reported lost.
        return self._plan("complete_and_fetch", steps)

    def touch(self, queue: str, targets: Targets) -> Plan[int]:
        """Heartbeat: ``heartbeat_on = now()`` for active jobs."""
        sql = f"""UPDATE {self.s}.job j SET heartbeat_on = now()
            FROM {_targets_sql(2)}
            WHERE j.name = $1 AND j.state = 'active' AND {_fence()}
            RETURNING j.id"""
        return self._single("touch", sql, (queue, *_target_params(targets)), rowcount)

    def cancel(self, queue: str, targets: Targets) -> Plan[int]:
        """queued or active -> cancelled."""
        return self._set_state(
            "cancel", queue, targets, UNFINISHED, "state = 'cancelled', completed_on = now()"
        )

    def resume(self, queue: str, targets: Targets) -> Plan[int]:
        """cancelled -> created, runnable now (``keep_until`` moves with ``start_after``)."""
        return self._set_state(
            "resume",
            queue,
            targets,
            frozenset({JobState.CANCELLED}),
            "state = 'created', completed_on = NULL, start_after = now(), "
            "keep_until = now() + j.retention_seconds * interval '1 second'",
            notify=True,
        )

    def retry(self, queue: str, targets: Targets) -> Plan[int]:
        """failed -> retry, granting one more attempt."""
        return self._set_state(
            "retry",
            queue,
            targets,
            frozenset({JobState.FAILED}),
            "state = 'retry', retry_limit = j.retry_limit + 1, completed_on = NULL, "
            "start_after = now(), keep_until = now() + j.retention_seconds * interval '1 second'",
            notify=True,
        )

    def _set_state(
        self,
        name: str,
        queue: str,
        targets: Targets,
        accepted: frozenset[JobState],
        change: str,
        *,
        notify: bool = False,
    ) -> Plan[int]:
        sql = f"""UPDATE {self.s}.job j SET {change}
            FROM (SELECT DISTINCT id FROM unnest($2::uuid[]) AS u(id)) t
            WHERE j.name = $1 AND j.id = t.id AND j.state IN {in_list(accepted)}
            RETURNING j.id"""
        params: tuple[Any, ...] = (queue, targets.ids)
        if notify:  # the jobs are runnable again: wake listening workers
            sql, params = notifying(self, sql, params, "$1::text")
        return self._single(name, sql, params, rowcount)

    def delete_jobs(self, queue: str, targets: Targets) -> Plan[int]:
        """Delete jobs in any state."""
        sql = f"DELETE FROM {self.s}.job WHERE name = $1 AND id = ANY($2::uuid[]) RETURNING id"
        return self._single("delete_jobs", sql, (queue, targets.ids), rowcount)

    def get_job(self, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
        """One job, or None."""
        return self._single(
            "get_job",
            f"SELECT {JOB_COLUMNS} FROM {self.s}.job WHERE name = $1 AND id = $2::uuid",
            (queue, job_id),
            lambda rows: Job.from_row(rows[0]) if rows else None,
        )

    # -- failing (shared by fail, expiry and heartbeat timeouts) ----------------------------

    def fail(self, queue: str, targets: Targets, output_json: str | None) -> Plan[int]:
        """queued or active -> retry or failed; dead-letter copies in the same transaction."""
        # A bare id fails a queued or active job; a Job only its own, still active attempt.
        where = (
            f"j.name = $1 AND j.state IN {in_list(UNFINISHED)} AND {_fence()} "
            "AND (t.retry_count IS NULL OR j.state = 'active')"
        )
        params = (queue, *_target_params(targets), output_json)
        return self._fail_plan("fail", f", {_targets_sql(2)}", where, "$4", params)

    def expire(self) -> Plan[int]:
        """Fail active jobs that ran past ``started_on + expire_seconds``."""
        where = (
            "j.state = 'active' AND j.started_on + j.expire_seconds * interval '1 second' < now()"
        )
        return self._fail_plan("expire", "", where, "$1", (TIMED_OUT,))

    def expire_heartbeats(self) -> Plan[int]:
        """Fail active jobs whose heartbeat is older than ``heartbeat_seconds``."""
        where = (
            "j.state = 'active' AND j.heartbeat_seconds IS NOT NULL AND "
            "j.heartbeat_on + j.heartbeat_seconds * interval '1 second' < now()"
        )
        return self._fail_plan("expire_heartbeats", "", where, "$1", (HEARTBEAT_TIMED_OUT,))

    def _fail_update(self, source: str, where: str, output: str) -> str:
        # The delay is computed once per row in a sub-SELECT so that start_after and
        # keep_until use the same random jitter.
        return f"""UPDATE {self.s}.job j SET
                (state, start_after, keep_until, completed_on, output) = (
                    SELECT CASE WHEN x.again THEN 'retry' ELSE 'failed' END,
                        CASE WHEN x.again THEN x.at ELSE j.start_after END,
                        CASE WHEN x.again
                            THEN x.at + j.retention_seconds * interval '1 second'
                            ELSE j.keep_until END,
                        CASE WHEN x.again THEN NULL ELSE now() END,
                        {output}::text::jsonb
                    FROM (SELECT j.retry_count < j.retry_limit AS again,
                                 now() + {RETRY_DELAY_SQL} * interval '1 second' AS at) x)
            FROM {self.s}.queue sq{source}
            WHERE sq.name = j.name AND {where}
            RETURNING j.name, j.id, j.state, j.priority, j.retry_count,
                j.data::text AS data, j.output::text AS output, sq.dead_letter"""

    def _dead_letter_insert(self, source: str) -> str:
        """INSERT of dead-letter copies of the failed rows ``f`` of ``source``."""
        return f"""INSERT INTO {self.s}.job (id, name, data, output, priority, retry_limit,
                retry_delay, retry_backoff, retry_delay_max, expire_seconds, heartbeat_seconds,
                retention_seconds, deletion_seconds, policy, start_after, keep_until,
                source_queue, source_id, source_retry_count)
            SELECT gen_random_uuid(), q.name, f.data::jsonb, f.output::jsonb, f.priority,
                q.retry_limit, q.retry_delay, q.retry_backoff, q.retry_delay_max,
                q.expire_seconds, q.heartbeat_seconds, q.retention_seconds, q.deletion_seconds,
                q.policy, now(), now() + q.retention_seconds * interval '1 second',
                f.name, f.id, f.retry_count
            FROM {source} JOIN {self.s}.queue q ON q.name = f.dead_letter
            WHERE f.state = 'failed'"""

    def _fail_plan(
        self, name: str, source: str, where: str, output: str, params: tuple[Any, ...]
    ) -> Plan[int]:
        update = self._fail_update(source, where, output)
        if self.capabilities.multi_mutation_cte:
            sql = f"""WITH changed AS ({update}),
                dead AS ({self._dead_letter_insert("changed f")} RETURNING 1)
                SELECT count(*) AS n FROM changed"""
            return self._single(name, sql, params, _count)
        copy = self._dead_letter_insert(
            "unnest($1::text[], $2::uuid[], $3::text[], $4::int[], $5::int[], $6::text[], "
            "$7::text[], $8::text[]) AS f(name, id, state, priority, retry_count, data, output, "
            "dead_letter)"
        )

        def steps() -> Steps[int]:
            rows = yield Statement(update, params)
            dead = [r for r in rows if r["state"] == "failed" and r["dead_letter"] is not None]
            if dead:
                yield Statement(copy, _columns(dead, COPIED_COLUMNS))
            return len(rows)

        return self._plan(name, steps, transaction=True)

    # -- redrive ---------------------------------------------------------------------------

    def redrive(self, dlq: str, to: str | None, limit: int) -> Plan[int]:
        """Move up to ``limit`` queued jobs of ``dlq`` back to their source queue (or ``to``)
        as fresh jobs (new id, ``retry_count`` 0, the target queue's settings)."""
        s = self.s
        lock = (
            " FOR UPDATE OF d SKIP LOCKED" if self.capabilities.skip_locked else " FOR UPDATE OF d"
        )
        pick = f"""SELECT d.name, d.id, d.data::text AS data, d.priority, q.name AS target
            FROM {s}.job d JOIN {s}.queue q ON q.name = coalesce($2::text, d.source_queue)
            WHERE d.name = $1 AND d.state IN {in_list(QUEUED)}
            ORDER BY d.created_on, d.id LIMIT $3{lock}"""

        def insert(source: str) -> str:
            return f"""INSERT INTO {s}.job (id, name, data, priority, retry_limit, retry_delay,
                    retry_backoff, retry_delay_max, expire_seconds, heartbeat_seconds,
                    retention_seconds, deletion_seconds, policy, start_after, keep_until)
                SELECT gen_random_uuid(), q.name, m.data::jsonb, m.priority, q.retry_limit,
                    q.retry_delay, q.retry_backoff, q.retry_delay_max, q.expire_seconds,
                    q.heartbeat_seconds, q.retention_seconds, q.deletion_seconds, q.policy,
                    now(), now() + q.retention_seconds * interval '1 second'
                FROM {source} JOIN {s}.queue q ON q.name = m.target"""

        def steps() -> Steps[int]:
            rows = yield Statement(
                f"SELECT name FROM {s}.queue WHERE name = $1 OR name = $2::text", (dlq, to)
            )
            for field, queue in (("dlq", dlq), ("to", to)):
                if queue is not None and queue not in {r["name"] for r in rows}:
                    raise QueueNotFound(queue, field=field)
            if self.capabilities.multi_mutation_cte:
                rows = yield Statement(
                    f"""WITH pick AS ({pick}),
                        moved AS (DELETE FROM {s}.job d USING pick
                            WHERE d.name = pick.name AND d.id = pick.id RETURNING d.id),
                        added AS ({insert("pick m")} RETURNING 1)
                    SELECT count(*) AS n FROM added""",
                    (dlq, to, limit),
                )
                return _count(rows)
            picked = yield Statement(pick, (dlq, to, limit))
            if not picked:
                return 0
            yield Statement(
                f"DELETE FROM {s}.job WHERE name = $1 AND id = ANY($2::uuid[])",
                (dlq, [r["id"] for r in picked]),
            )
            yield Statement(
                insert("unnest($1::text[], $2::int[], $3::text[]) AS m(data, priority, target)"),
                _columns(picked, ("data", "priority", "target")),
            )
            return len(picked)

        return self._plan("redrive", steps, transaction=True)

    # -- maintenance -----------------------------------------------------------------------

    def remove_expired_retention(self) -> Plan[int]:
        """Delete queued jobs past ``keep_until``."""
        sql = f"""DELETE FROM {self.s}.job
            WHERE state IN {in_list(QUEUED)} AND keep_until < now() RETURNING id"""
        return self._single("retention", sql, (), rowcount)

    def delete_finished(self) -> Plan[int]:
        """Delete finished jobs past ``completed_on + deletion_seconds`` (0 keeps forever)."""
        sql = f"""DELETE FROM {self.s}.job
            WHERE state IN {in_list(FINISHED)} AND deletion_seconds > 0
              AND completed_on + deletion_seconds * interval '1 second' < now()
            RETURNING id"""
        return self._single("deletion", sql, (), rowcount)

    def mark_maintained(self) -> Plan[None]:
        """Record when maintenance last ran."""
        return self._single(
            "mark_maintained",
            f"UPDATE {self.s}.version SET maintained_on = now()",
            (),
            lambda _rows: None,
        )
