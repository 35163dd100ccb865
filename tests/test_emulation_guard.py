"""The emulation guard: every rule of every profile, the engines' own SQL, and end to end.

The rule tests are pure: for each rule at least one statement the real server rejects and at
least one close look-alike it runs. The guard's session bookkeeping (isolation, the session
level once per borrow, nothing sent on a rejection, transaction memory) is tested on a
recording fake session, and then for real on a throwaway PostgreSQL through psycopg (sync)
and asyncpg (async).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from alkstore.conformance.cluster import TempCluster
from alkstore.core.capabilities import Capabilities
from alkstore.core.errors import AlkstoreError
from alkstore.core.plans import Isolation, Row, Statement
from alkstore.drivers import async_driver, sync_driver
from alkstore.drivers.base import AsyncSession, AsyncSource, DriverSettings, SyncSession, SyncSource
from alkstore.engines import engine_class
from alkstore.engines.emulation import (
    CITUS_DISTRIBUTED,
    COCKROACHDB,
    PROFILES,
    YUGABYTEDB,
    EmulationRejected,
    Profile,
    guard_async,
    guard_sync,
    normalize,
    rules_for,
    rules_markdown,
    rules_section,
)
from alkstore.engines.postgres import PostgresEngine
from alkstore.engines.postgres.schema import MIGRATIONS

CRDB, YB, CITUS = COCKROACHDB, YUGABYTEDB, CITUS_DISTRIBUTED

# --- SQL the postgres engine emits (copied from engine.py / schema.py, schema "s") ----------------

FETCH_SKIP_LOCKED = """WITH next AS (SELECT name, id FROM "s".job
                WHERE name = $1 AND state IN ('created', 'retry') AND start_after <= now()
                ORDER BY priority DESC, created_on, id LIMIT $2 FOR UPDATE SKIP LOCKED)
            UPDATE "s".job j SET state = 'active', started_on = now(),
                heartbeat_on = CASE WHEN j.heartbeat_seconds IS NULL THEN NULL ELSE now() END,
                retry_count = CASE WHEN j.started_on IS NULL THEN j.retry_count
                                   ELSE j.retry_count + 1 END
            FROM next WHERE j.name = next.name AND j.id = next.id
            RETURNING j.id, j.name, j.data::text AS data, j.state, j.retry_count"""

FETCH_RECHECK = """WITH next AS (SELECT name, id FROM "s".job
                WHERE name = $1 AND state IN ('created', 'retry') AND start_after <= now()
                ORDER BY priority DESC, created_on, id LIMIT $2)
            UPDATE "s".job j SET state = 'active', started_on = now(),
                retry_count = CASE WHEN j.started_on IS NULL THEN j.retry_count
                                   ELSE j.retry_count + 1 END
            FROM next WHERE j.name = next.name AND j.id = next.id
                AND j.state IN ('created', 'retry')
            RETURNING j.id, j.name, j.state"""

FAIL_UPDATE = """UPDATE "s".job j SET
                (state, start_after, keep_until, completed_on, output) = (
                    SELECT CASE WHEN x.again THEN 'retry' ELSE 'failed' END,
                        CASE WHEN x.again THEN x.at ELSE j.start_after END,
                        CASE WHEN x.again
                            THEN x.at + j.retention_seconds * interval '1 second'
                            ELSE j.keep_until END,
                        CASE WHEN x.again THEN NULL ELSE now() END,
                        $5::text::jsonb
                    FROM (SELECT j.retry_count < j.retry_limit AS again,
                                 now() + j.retry_delay::float8 * interval '1 second' AS at) x)
            FROM "s".queue sq, unnest($2::uuid[], $3::int[], $4::timestamptz[])
                AS t(id, retry_count, started_on)
            WHERE sq.name = j.name AND j.name = $1 AND j.state IN ('active', 'created', 'retry')
                AND j.id = t.id
            RETURNING j.name, j.id, j.state, j.priority, j.retry_count,
                j.data::text AS data, j.output::text AS output, sq.dead_letter"""

DEAD_LETTER_INSERT = PostgresEngine("s")._dead_letter_insert("{source}")

FAIL_CTE = f"""WITH changed AS ({FAIL_UPDATE}),
                dead AS ({DEAD_LETTER_INSERT.format(source="changed f")} RETURNING 1)
                SELECT count(*) AS n FROM changed"""

REDRIVE_PICK = """SELECT d.name, d.id, d.data::text AS data, d.priority, q.name AS target
            FROM "s".job d JOIN "s".queue q ON q.name = coalesce($2::text, d.source_queue)
            WHERE d.name = $1 AND d.state IN ('created', 'retry')
            ORDER BY d.created_on, d.id LIMIT $3"""

REDRIVE_INSERT = """INSERT INTO "s".job (id, name, data, priority, retry_limit, retry_delay,
                    retry_backoff, retry_delay_max, expire_seconds, heartbeat_seconds,
                    retention_seconds, deletion_seconds, policy, start_after, keep_until)
                SELECT gen_random_uuid(), q.name, m.data::jsonb, m.priority, q.retry_limit,
                    q.retry_delay, q.retry_backoff, q.retry_delay_max, q.expire_seconds,
                    q.heartbeat_seconds, q.retention_seconds, q.deletion_seconds, q.policy,
                    now(), now() + q.retention_seconds * interval '1 second'
                FROM {source} JOIN "s".queue q ON q.name = m.target"""

REDRIVE_CTE = f"""WITH pick AS ({REDRIVE_PICK} FOR UPDATE OF d SKIP LOCKED),
                moved AS (DELETE FROM "s".job d USING pick
                    WHERE d.name = pick.name AND d.id = pick.id RETURNING d.id),
                added AS ({REDRIVE_INSERT.format(source="pick m")} RETURNING 1)
            SELECT count(*) AS n FROM added"""

JOB_DDL = """CREATE TABLE "s".job (
            id uuid NOT NULL,
            name text NOT NULL,
            priority int NOT NULL DEFAULT 0,
            data jsonb,
            state text NOT NULL DEFAULT 'created',
            retry_count int NOT NULL DEFAULT 0,
            policy text,
            singleton_key text,
            start_after timestamptz NOT NULL DEFAULT now(),
            keep_until timestamptz NOT NULL,
            CONSTRAINT job_pkey PRIMARY KEY (name, id),
            CONSTRAINT job_state_check CHECK (state IN ('created', 'retry', 'active'))
        )"""

QUEUE_DDL = """CREATE TABLE "s".queue (
            name text PRIMARY KEY,
            policy text NOT NULL DEFAULT 'standard',
            retry_limit int NOT NULL,
            dead_letter text CONSTRAINT queue_dead_letter_fkey REFERENCES "s".queue (name),
            partition bool NOT NULL DEFAULT false,
            table_name text,
            CONSTRAINT queue_dead_letter_not_self CHECK (dead_letter IS DISTINCT FROM name)
        )"""

JOB_DDL_PARTITIONED = JOB_DDL + " PARTITION BY LIST (name)"
JOB_DEFAULT_PARTITION = 'CREATE TABLE "s".job_default PARTITION OF "s".job DEFAULT'
FETCH_INDEX = """CREATE INDEX job_fetch ON "s".job (name, priority DESC, created_on, id)
            WHERE state IN ('created', 'retry')"""
FETCH_INDEX_INCLUDE = """CREATE INDEX job_fetch ON "s".job (name, priority DESC, created_on, id)
            INCLUDE (start_after)
            WHERE state IN ('created', 'retry')"""
PARTITION_FUNCTION = """CREATE FUNCTION "s".create_queue_partition(schema_name text,
                queue_name text, table_name text)
            RETURNS void LANGUAGE plpgsql AS $fn$
            BEGIN
              EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.job FOR VALUES IN (%L)',
                             schema_name, table_name, schema_name, queue_name);
            END
            $fn$"""
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock($1::bigint)"
CLAIM_ROW_LOCK = """SELECT name FROM "s".migration_lock WHERE name = 'migrate' FOR UPDATE"""
UPDATE_QUEUE = """UPDATE "s".queue SET retry_limit = $2, retry_delay = $3, dead_letter = $10,
                    updated_on = now()
                WHERE name = $1 RETURNING name, policy"""


# --- every rule: what it rejects and a close look-alike it lets through ---------------------------

REJECT: list[tuple[Profile, str, str, str]] = [
    # (profile, rule, statement, text the error must name)
    (CRDB, "skip-locked", FETCH_SKIP_LOCKED, "SKIP LOCKED"),
    (CRDB, "skip-locked", "select id from t where a = $1 for share /* c */ skip locked", "skip"),
    (CRDB, "partitioning", JOB_DDL_PARTITIONED, "PARTITION BY LIST"),
    (CRDB, "partitioning", JOB_DEFAULT_PARTITION, "PARTITION OF"),
    (CRDB, "partitioning", "ALTER TABLE t ATTACH PARTITION t1 FOR VALUES IN ('a')", "PARTITION"),
    (CRDB, "deferrable", "CREATE TABLE t (id int PRIMARY KEY DEFERRABLE)", "DEFERRABLE"),
    (
        CRDB,
        "deferrable",
        "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (p) REFERENCES p (id) INITIALLY DEFERRED",
        "INITIALLY DEFERRED",
    ),
    (CRDB, "listen-notify", "LISTEN alkstore_jobs", "LISTEN"),
    (CRDB, "listen-notify", "NOTIFY alkstore_jobs, 'payload'", "NOTIFY"),
    (CRDB, "listen-notify", "SELECT pg_notify($1, $2)", "pg_notify"),
    (CRDB, "listen-notify", "UNLISTEN *", "UNLISTEN"),
    (CRDB, "multi-mutation-cte", FAIL_CTE, 'multi-mutation CTE on table "job"'),
    (
        CRDB,
        "multi-mutation-cte",
        'WITH a AS (INSERT INTO "t_abc"."job" (id) VALUES (1) RETURNING id) '
        "INSERT INTO t_abc.job (id) SELECT id + 1 FROM a ON CONFLICT DO NOTHING",
        'multi-mutation CTE on table "job"',
    ),
    (
        CRDB,
        "multi-mutation-cte",
        "WITH gone AS (DELETE FROM x.job d WHERE d.id = $1 RETURNING d.id) "
        "UPDATE x.job j SET state = 'created' FROM gone WHERE j.id = gone.id",
        'multi-mutation CTE on table "job" (DELETE, UPDATE)',
    ),
    (CRDB, "covering-index", FETCH_INDEX_INCLUDE, "INCLUDE (start_after)"),
    (CRDB, "covering-index", "CREATE UNIQUE INDEX u ON t (a) INCLUDE (b, c)", "INCLUDE"),
    (CRDB, "advisory-locks", MIGRATION_LOCK, "pg_advisory_xact_lock"),
    (CRDB, "advisory-locks", "SELECT pg_try_advisory_lock(1), 2", "pg_try_advisory_lock"),
    (CRDB, "plpgsql", PARTITION_FUNCTION, "LANGUAGE plpgsql"),
    (CRDB, "plpgsql", "DO $$ BEGIN PERFORM 1; END $$", "DO block"),
    (CRDB, "plpgsql", "do 'begin null; end'", "DO block"),
    (
        CRDB,
        "plpgsql",
        "CREATE FUNCTION f() RETURNS int AS 'BEGIN RETURN 1; END' LANGUAGE 'plpgsql'",
        "plpgsql",
    ),
    (
        CRDB,
        "add-column-then-update",
        "ALTER TABLE s.job ADD COLUMN extra int; UPDATE s.job SET extra = 1",
        "UPDATE of column 'extra'",
    ),
    (
        CRDB,
        "add-column-then-update",
        'ALTER TABLE "s"."job" ADD extra int, ADD COLUMN IF NOT EXISTS other text; '
        "UPDATE s.job j SET (other, state) = ('x', 'y') WHERE j.id = $1",
        "UPDATE of column 'other'",
    ),
    (YB, "advisory-locks", MIGRATION_LOCK, "pg_advisory_xact_lock"),
    (YB, "advisory-locks", "SELECT pg_advisory_unlock_all()", "pg_advisory_unlock_all"),
    (YB, "partitioning", JOB_DDL_PARTITIONED, "PARTITION BY LIST"),
    (YB, "partitioning", JOB_DEFAULT_PARTITION, "PARTITION OF"),
    (YB, "listen-notify", "LISTEN alkstore_jobs", "LISTEN"),
    (YB, "listen-notify", "SELECT pg_notify('alkstore', $1)", "pg_notify"),
    (YB, "deferrable-key", "CREATE TABLE t (id int PRIMARY KEY DEFERRABLE)", "PRIMARY KEY"),
    (
        YB,
        "deferrable-key",
        "ALTER TABLE t ADD CONSTRAINT u UNIQUE (a, b) DEFERRABLE INITIALLY DEFERRED",
        "DEFERRABLE INITIALLY DEFERRED on UNIQUE",
    ),
    (
        YB,
        "deferrable-key",
        "CREATE TABLE t (p int REFERENCES q (id), a int, CONSTRAINT u UNIQUE (a) "
        "INITIALLY DEFERRED)",
        "INITIALLY DEFERRED on UNIQUE",
    ),
    (CRDB, "ctid", "UPDATE s.job j SET state = 'active' FROM n WHERE j.ctid = n.ctid", "ctid"),
    (YB, "ctid", "SELECT CTID FROM s.job WHERE name = $1 FOR UPDATE SKIP LOCKED", "CTID"),
    (YB, "alter-type", "ALTER TYPE mood ADD VALUE 'meh'", "ALTER TYPE mood"),
    (YB, "lock-table", 'LOCK TABLE "s".job IN EXCLUSIVE MODE', "LOCK TABLE"),
    (YB, "lock-table", "BEGIN; LOCK s.job; COMMIT", "LOCK s.job"),
    (YB, "xid-functions", "SELECT txid_current()", "txid_current"),
    (YB, "xid-functions", "SELECT pg_current_xact_id() AS x", "pg_current_xact_id"),
    (
        CRDB,
        "on-conflict-expression",
        "INSERT INTO s.job (id, name) VALUES ($1, $2) ON CONFLICT ((lower(name)), id) DO NOTHING",
        "ON CONFLICT ((lower(name)), id)",
    ),
    (
        CRDB,
        "triggers",
        "CREATE TRIGGER job_wake AFTER INSERT ON s.job FOR EACH ROW EXECUTE FUNCTION f()",
        "CREATE TRIGGER job_wake",
    ),
    (
        YB,
        "exclusion-constraint",
        "CREATE TABLE t (r tstzrange, EXCLUDE USING gist (r WITH &&))",
        "EXCLUDE USING gist (",
    ),
    (YB, "inheritance", "CREATE TABLE s.job_archive (note text) INHERITS (s.job)", "INHERITS"),
    (YB, "gist-index", "CREATE INDEX job_span ON s.job USING gist (span)", "gist"),
    (YB, "two-phase-commit", "PREPARE TRANSACTION 'alkstore-1'", "PREPARE TRANSACTION"),
    (YB, "two-phase-commit", "COMMIT PREPARED 'alkstore-1'", "COMMIT PREPARED"),
]

ACCEPT: list[tuple[Profile, str, str]] = [
    # (profile, rule, statement): every rule of the profile must let it through
    (CRDB, "skip-locked", FETCH_RECHECK),
    (CRDB, "skip-locked", "SELECT id FROM s.job WHERE name = $1 FOR UPDATE"),
    (CRDB, "skip-locked", "INSERT INTO notes (body) VALUES ('FOR UPDATE SKIP LOCKED')"),
    (CRDB, "skip-locked", "SELECT $x$SKIP LOCKED$x$ AS body -- FOR UPDATE SKIP LOCKED"),
    (CRDB, "partitioning", JOB_DDL),
    (CRDB, "partitioning", QUEUE_DDL),  # a column named "partition"
    (CRDB, "partitioning", "SELECT row_number() OVER (PARTITION BY name ORDER BY id) FROM t"),
    (CRDB, "partitioning", "SELECT 'PARTITION BY LIST (name)' AS doc"),
    (CRDB, "deferrable", "CREATE TABLE t (id int PRIMARY KEY NOT DEFERRABLE)"),
    (CRDB, "deferrable", "ALTER TABLE t ADD CONSTRAINT u UNIQUE (a) NOT DEFERRABLE"),
    (CRDB, "deferrable", "SELECT 'DEFERRABLE' AS word, deferrable_until FROM t"),
    (CRDB, "listen-notify", "SELECT notify, listen_at FROM t WHERE note <> 'NOTIFY x'"),
    (CRDB, "listen-notify", "UPDATE t SET notify = true WHERE id = $1"),
    (CRDB, "multi-mutation-cte", FETCH_RECHECK),
    (
        CRDB,
        "multi-mutation-cte",
        'WITH a AS (INSERT INTO "s".job (id) VALUES ($1) RETURNING id) '
        'INSERT INTO "s".job (id) SELECT id FROM a',
    ),
    (
        CRDB,
        "multi-mutation-cte",
        'WITH q AS (UPDATE "s".queue SET updated_on = now() WHERE name = $1 RETURNING name) '
        'INSERT INTO "s".job (id, name) SELECT $2, name FROM q',
    ),
    (
        CRDB,
        "multi-mutation-cte",
        "WITH a AS (UPDATE a.job SET state = 'x' RETURNING id) INSERT INTO b.job (id) "
        "SELECT id FROM a",
    ),
    (CRDB, "multi-mutation-cte", FAIL_UPDATE),
    (CRDB, "multi-mutation-cte", DEAD_LETTER_INSERT.format(source="unnest($1::text[]) AS f")),
    (CRDB, "covering-index", FETCH_INDEX),
    (CRDB, "covering-index", "INSERT INTO notes (body) VALUES ('(a) INCLUDE (b)')"),
    (CRDB, "advisory-locks", "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"),
    (CRDB, "advisory-locks", "SELECT 'pg_advisory_lock(1)' AS doc, advisory FROM t"),
    (CRDB, "advisory-locks", CLAIM_ROW_LOCK),
    (CRDB, "plpgsql", "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$"),
    (CRDB, "plpgsql", "INSERT INTO t (id) VALUES (1) ON CONFLICT DO NOTHING"),
    (CRDB, "plpgsql", "SELECT lanname FROM pg_language WHERE lanname = 'plpgsql'"),
    (
        CRDB,
        "add-column-then-update",
        "ALTER TABLE s.job ADD COLUMN extra int; UPDATE s.queue SET extra = 1",
    ),
    (
        CRDB,
        "add-column-then-update",
        "ALTER TABLE s.job ADD COLUMN extra int; UPDATE s.job SET state = 'x'",
    ),
    (
        CRDB,
        "add-column-then-update",
        "ALTER TABLE s.job ADD CONSTRAINT extra CHECK (true); UPDATE s.job SET extra = 1",
    ),
    (YB, "advisory-locks", "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"),
    (YB, "partitioning", JOB_DDL),
    (YB, "partitioning", "SELECT rank() OVER (PARTITION BY list(x)) FROM t"),
    (YB, "listen-notify", "SELECT 'LISTEN x' AS doc, notify FROM t"),
    (
        YB,
        "deferrable-key",
        "CREATE TABLE t (p int REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)",
    ),
    (
        YB,
        "deferrable-key",
        "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES p (id) "
        "ON DELETE CASCADE DEFERRABLE",
    ),
    (YB, "deferrable-key", "CREATE TABLE t (id int UNIQUE, p int REFERENCES q (id) DEFERRABLE)"),
    (YB, "deferrable-key", "CREATE TABLE t (id int PRIMARY KEY NOT DEFERRABLE)"),
    (YB, "alter-type", "ALTER TABLE t ALTER COLUMN c TYPE bigint, ALTER d TYPE text"),
    (CRDB, "ctid", "SELECT ybctid, ctid_count FROM t WHERE note = 'ctid'"),
    (YB, "ctid", "SELECT ybctid FROM s.job -- not the ctid"),
    (YB, "lock-table", "SELECT * FROM pg_locks"),
    (YB, "lock-table", "SELECT id FROM s.job WHERE name = $1 FOR UPDATE"),
    (YB, "lock-table", "UPDATE t SET lock = true WHERE id = $1"),
    (YB, "xid-functions", "SELECT xmin, id FROM s.job"),
    (YB, "xid-functions", "SELECT 'txid_current()' AS doc"),
    (CRDB, "on-conflict-expression", "INSERT INTO t (a) VALUES (1) ON CONFLICT DO NOTHING"),
    (
        CRDB,
        "on-conflict-expression",
        "INSERT INTO s.job (id, name) VALUES ($1, $2) ON CONFLICT (name, id) DO NOTHING",
    ),
    (CRDB, "triggers", "SELECT tgname FROM pg_trigger WHERE tgname <> 'CREATE TRIGGER x'"),
    (YB, "exclusion-constraint", "ALTER TABLE t ADD CONSTRAINT u UNIQUE (a)"),
    (YB, "exclusion-constraint", "SELECT exclude FROM t WHERE note = 'EXCLUDE USING gist ('"),
    (YB, "inheritance", "SELECT inherits, relname FROM t"),
    (YB, "gist-index", "CREATE INDEX job_fetch ON s.job USING btree (name, id)"),
    (YB, "two-phase-commit", "PREPARE fetch_jobs AS SELECT 1"),
    (YB, "two-phase-commit", "COMMIT"),
]


def _params(cases: list[Any]) -> list[Any]:
    """``pytest.param`` per case, its id ``profile-rule`` (pytest numbers repeats)."""
    return [pytest.param(*case, id=f"{case[0].name}-{case[1]}") for case in cases]


@pytest.mark.parametrize(("profile", "rule", "sql", "construct"), _params(REJECT))
def test_rule_rejects(profile: Profile, rule: str, sql: str, construct: str) -> None:
    snippet = profile.rule(rule).check(sql)
    assert snippet is not None, f"{rule} missed: {normalize(sql)}"
    error = profile.violation(sql)
    assert error is not None
    assert (error.profile, error.rule) == (profile.name, rule)
    assert construct.lower() in str(error).lower()
    assert str(error).startswith(f"{profile.name} would reject: ")
    assert error.sql == sql and error.reason and error.source


@pytest.mark.parametrize(("profile", "rule", "sql"), _params(ACCEPT))
def test_rule_accepts_look_alike(profile: Profile, rule: str, sql: str) -> None:
    assert profile.rule(rule).check(sql) is None
    assert profile.violation(sql) is None


@pytest.mark.parametrize("profile", [CRDB, YB], ids=lambda p: p.name)
def test_every_rule_has_a_rejected_and_an_accepted_case(profile: Profile) -> None:
    names = [rule.id for rule in profile.rules]
    assert len(names) == len(set(names))
    rejected = {rule for p, rule, _, _ in REJECT if p is profile}
    accepted = {rule for p, rule, _ in ACCEPT if p is profile}
    assert rejected == set(names)
    assert accepted == set(names)
    for rule in profile.rules:
        assert rule.reason and "\n" not in rule.reason
        assert rule.source.startswith("https://")


def test_profiles() -> None:
    assert set(PROFILES) == {"cockroachdb", "yugabytedb", "citus-distributed"}
    assert [len(p.rules) for p in PROFILES.values()] == [12, 12, 15]
    assert (CRDB.isolation, CRDB.ints_as_text) == (Isolation.SERIALIZABLE, True)
    assert (YB.isolation, YB.ints_as_text) == (Isolation.REPEATABLE_READ, False)
    assert (CITUS.isolation, CITUS.ints_as_text) == (None, False)
    assert issubclass(EmulationRejected, AlkstoreError)
    assert CRDB.rule("skip-locked").source.endswith("issues/97135")
    assert YB.rule("partitioning").source.endswith("issues/21833")
    with pytest.raises(KeyError):
        CRDB.rule("row-lock-filter")


def test_normalize() -> None:
    sql = """SELECT 'it''s -- not a comment', E'a\\'b', $q$ FOR UPDATE $q$, "We""ird" -- gone
        /* block /* nested */ comment */ FROM   t"""
    assert normalize(sql) == "SELECT '', E'', '', \"We\"\"ird\" FROM t"
    body = normalize("CREATE FUNCTION f() RETURNS void AS $fn$ SELECT 'x' -- c\n $fn$ LANGUAGE sql")
    assert body == "CREATE FUNCTION f() RETURNS void AS $$ SELECT '' $$ LANGUAGE sql"
    assert normalize("SELECT $1::int, a$b FROM t") == "SELECT $1::int, a$b FROM t"


# --- the SQL the engines emit ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "rules"),
    [
        (FETCH_SKIP_LOCKED, {"skip-locked"}),
        (FAIL_CTE, {"multi-mutation-cte"}),
        (REDRIVE_CTE, {"skip-locked", "multi-mutation-cte"}),
        (JOB_DDL_PARTITIONED, {"partitioning"}),
        (JOB_DEFAULT_PARTITION, {"partitioning"}),
        (FETCH_INDEX_INCLUDE, {"covering-index"}),
        (PARTITION_FUNCTION, {"plpgsql"}),
        (MIGRATION_LOCK, {"advisory-locks"}),
    ],
    ids=[
        "fetch",
        "fail",
        "redrive",
        "partitioned-job",
        "default-partition",
        "include",
        "plpgsql",
        "advisory",
    ],
)
def test_cockroachdb_rejects_the_postgres_engine_sql(sql: str, rules: set[str]) -> None:
    assert {rule.id for rule in CRDB.rules if rule.check(sql)} == rules
    assert CRDB.violation(sql) is not None


@pytest.mark.parametrize(
    "sql",
    [
        FETCH_RECHECK,
        FAIL_UPDATE,
        REDRIVE_PICK + " FOR UPDATE OF d",
        CLAIM_ROW_LOCK,
        JOB_DDL,
        QUEUE_DDL,
        FETCH_INDEX,
        UPDATE_QUEUE,
    ],
    ids=["fetch", "fail", "redrive-pick", "claim-row", "job", "queue", "index", "update-queue"],
)
def test_cockroachdb_accepts_the_alternatives(sql: str) -> None:
    assert CRDB.violation(sql) is None


def test_yugabytedb_and_citus_on_the_postgres_engine_sql() -> None:
    errors = [YB.violation(s) for s in (JOB_DDL_PARTITIONED, JOB_DEFAULT_PARTITION, MIGRATION_LOCK)]
    assert [e.rule if e else None for e in errors] == [
        "partitioning",
        "partitioning",
        "advisory-locks",
    ]
    for sql in (FETCH_SKIP_LOCKED, FAIL_CTE, REDRIVE_CTE, FETCH_INDEX_INCLUDE, PARTITION_FUNCTION):
        assert YB.violation(sql) is None
    for sql in (REDRIVE_CTE, JOB_DDL, FETCH_INDEX_INCLUDE):
        assert CITUS.violation(sql) is None
    # What a real Citus 13.2 cluster refused (the lead rewrites that SQL for Citus).
    fail_with_jitter = FAIL_CTE.replace("retry_delay::float8", "retry_delay * (1 + random())")
    rejected = [CITUS.violation(sql) for sql in (FETCH_SKIP_LOCKED, fail_with_jitter)]
    assert [e.rule if e else None for e in rejected] == [
        "mutable-in-case",
        "volatile-in-modification",
    ]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_engines_own_schema_passes_its_guard(name: str) -> None:
    description = engine_class(name).description
    assert description.emulation_profile == name
    for ddl in MIGRATIONS[1]('"s"', description.capabilities):
        assert PROFILES[name].violation(ddl) is None, ddl
    postgres_ddl = MIGRATIONS[1]('"s"', engine_class("postgres").description.capabilities)
    rejected = [ddl for ddl in postgres_ddl if PROFILES[name].violation(ddl)]
    assert rejected  # the partitioned job table


# --- the guard's bookkeeping, on a recording fake session -------------------------------------


class FakeSession:
    """Records what reaches the "database"; returns canned rows."""

    def __init__(self, log: list[str], rows: list[Row]) -> None:
        self.log = log
        self.rows = rows

    def execute(self, statement: Statement) -> list[Row]:
        self.log.append(statement.sql)
        return [dict(row) for row in self.rows]

    @contextmanager
    def transaction(self, isolation: Isolation | None = None) -> Iterator[None]:
        self.log.append(f"<begin {isolation.value if isolation else 'default'}>")
        try:
            yield
        except BaseException:
            self.log.append("<rollback>")
            raise
        self.log.append("<commit>")

    def in_transaction(self) -> bool:
        return False


class FakeSource:
    """Hands out fake sessions that share one log."""

    def __init__(self, rows: list[Row] | None = None) -> None:
        self.log: list[str] = []
        self.rows = rows or []
        self.closed = False

    @contextmanager
    def session(self) -> Iterator[SyncSession]:
        self.log.append("<lease>")
        yield FakeSession(self.log, self.rows)

    def close(self) -> None:
        self.closed = True


SET_SERIALIZABLE = "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE"


def test_guard_sends_nothing_it_rejects() -> None:
    fake = FakeSource()
    source = guard_sync(fake, CRDB)
    with source.session() as session:
        with pytest.raises(EmulationRejected, match="SKIP LOCKED"):
            session.execute(Statement(FETCH_SKIP_LOCKED, ("q", 5)))
        assert fake.log == ["<lease>"]
        with session.transaction():
            with pytest.raises(EmulationRejected, match="advisory"):
                session.execute(Statement(MIGRATION_LOCK, (1,)))
            session.execute(Statement("SELECT 1"))
    assert fake.log == ["<lease>", "<begin serializable>", "SELECT 1", "<commit>"]
    source.close()
    assert fake.closed


def test_guard_forces_isolation_on_transactions_and_sessions() -> None:
    fake = FakeSource()
    source = guard_sync(fake, CRDB)
    with source.session() as session:
        with session.transaction(Isolation.READ_COMMITTED):
            session.execute(Statement("SELECT 1"))
        session.execute(Statement("SELECT 2"))
        session.execute(Statement("SELECT 3"))
        with session.transaction():
            pass
    with source.session() as session:  # a new borrow sets the session level again
        session.execute(Statement("SELECT 4"))
    assert fake.log == [
        "<lease>",
        "<begin serializable>",
        "SELECT 1",
        "<commit>",
        SET_SERIALIZABLE,
        "SELECT 2",
        "SELECT 3",
        "<begin serializable>",
        "<commit>",
        "<lease>",
        SET_SERIALIZABLE,
        "SELECT 4",
    ]


def test_guard_leaves_isolation_alone_without_a_profile_level() -> None:
    fake = FakeSource()
    with guard_sync(fake, CITUS).session() as session:
        with session.transaction(Isolation.REPEATABLE_READ):
            session.execute(Statement("SELECT 1"))
        session.execute(Statement("SELECT 2"))
    assert fake.log == ["<lease>", "<begin repeatable read>", "SELECT 1", "<commit>", "SELECT 2"]


def test_guard_forces_isolation_after_a_begin_statement() -> None:
    fake = FakeSource()
    with guard_sync(fake, YB).session() as session:
        session.execute(Statement("BEGIN ISOLATION LEVEL READ COMMITTED"))
        session.execute(Statement("ALTER TABLE t ADD COLUMN c int"))
        session.execute(Statement("UPDATE t SET c = 1"))  # yugabyte allows it
        session.execute(Statement("COMMIT"))
    assert fake.log == [
        "<lease>",
        "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "BEGIN ISOLATION LEVEL READ COMMITTED",
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "ALTER TABLE t ADD COLUMN c int",
        "UPDATE t SET c = 1",
        "COMMIT",
    ]


def test_guard_converts_ints_to_text_for_cockroachdb_only() -> None:
    row = {"n": 7, "flag": True, "ids": [1, 2], "f": 1.5, "s": "x", "none": None}
    with guard_sync(FakeSource([row]), CRDB).session() as session:
        assert session.execute(Statement("SELECT 1")) == [
            {"n": "7", "flag": True, "ids": ["1", "2"], "f": 1.5, "s": "x", "none": None}
        ]
    with guard_sync(FakeSource([row]), CITUS).session() as session:
        assert session.execute(Statement("SELECT 1")) == [row]


def test_add_column_memory_follows_transactions_and_savepoints() -> None:
    add = Statement("ALTER TABLE s.job ADD COLUMN extra int")
    update = Statement("UPDATE s.job SET extra = 1")
    with guard_sync(FakeSource(), CRDB).session() as session:
        session.execute(add)  # autocommit: its own transaction
        session.execute(update)
        with session.transaction():
            session.execute(add)
            with pytest.raises(EmulationRejected, match="add-column-then-update"):
                session.execute(update)
        with session.transaction():
            session.execute(update)  # a later transaction
            with pytest.raises(RuntimeError), session.transaction():
                session.execute(add)
                raise RuntimeError("roll the savepoint back")
            session.execute(update)  # the rolled-back savepoint took its ADD COLUMN along
            with session.transaction():
                session.execute(add)
            with pytest.raises(EmulationRejected, match="'extra'"):
                session.execute(update)  # a released savepoint's ADD COLUMN still counts
        session.execute(Statement("BEGIN"))
        session.execute(add)
        with pytest.raises(EmulationRejected):
            session.execute(update)
        session.execute(Statement("ROLLBACK"))
        session.execute(update)


def test_a_rejected_statement_leaves_the_memory_unchanged() -> None:
    memory: dict[str, set[tuple[str, ...]]] = {}
    sql = "ALTER TABLE s.job ADD COLUMN extra int; SELECT pg_advisory_lock(1)"
    assert CRDB.violation(sql, memory) is not None
    assert CRDB.violation("UPDATE s.job SET extra = 1", memory) is None
    assert CRDB.violation("ALTER TABLE s.job ADD COLUMN extra int", memory) is None
    error = CRDB.violation('UPDATE "s"."job" j SET extra = 1', memory)
    assert error is not None and error.rule == "add-column-then-update"
    assert CRDB.violation("UPDATE other.job SET extra = 1", memory) is None


# --- end to end on a real PostgreSQL ------------------------------------------------------------


@pytest.fixture(scope="module")
def _guard_dsn() -> Iterator[str]:
    with TempCluster() as cluster:
        yield cluster.dsn


def run(coro: Coroutine[Any, Any, None]) -> None:
    """Run one scenario, with a deadline so a hang fails instead of stalls."""

    async def bounded() -> None:
        async with asyncio.timeout(60):
            await coro

    asyncio.run(bounded())


class Guarded:
    """A guarded session, sync or async, behind async methods."""

    def __init__(self, session: SyncSession | AsyncSession) -> None:
        self.session = session

    async def q(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        """The rows as dicts, read through what a plan reads (``items``)."""
        result = self.session.execute(Statement(sql, params))
        rows: list[Row] = await result if asyncio.iscoroutine(result) else result
        return [dict(row.items()) for row in rows]

    async def one(self, sql: str, *params: Any) -> Any:
        rows = await self.q(sql, *params)
        return next(iter(rows[0].values()))

    @asynccontextmanager
    async def tx(self, isolation: Isolation | None = None) -> AsyncIterator[None]:
        manager = self.session.transaction(isolation)
        if isinstance(manager, AbstractAsyncContextManager):
            async with manager:
                yield
        else:
            with manager:
                yield


class GuardedSource:
    """``guard_sync`` over psycopg or ``guard_async`` over asyncpg, one connection."""

    def __init__(self, source: SyncSource | AsyncSource) -> None:
        self.source = source

    @classmethod
    async def open(cls, driver: str, dsn: str, profile: Profile) -> GuardedSource:
        settings = DriverSettings(pool_size=1)
        if driver == "psycopg":
            return cls(guard_sync(sync_driver("psycopg").open(dsn, settings), profile))
        return cls(guard_async(await async_driver("asyncpg").open(dsn, settings), profile))

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[Guarded]:
        manager = self.source.session()
        if isinstance(manager, AbstractAsyncContextManager):
            async with manager as session:
                yield Guarded(session)
        else:
            with manager as sync_session:
                yield Guarded(sync_session)

    async def close(self) -> None:
        result = self.source.close()
        if asyncio.iscoroutine(result):
            await result


DRIVERS = ["psycopg", "asyncpg"]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("profile", [CRDB, YB], ids=lambda p: p.name)
def test_a_rejected_statement_is_not_executed(
    _guard_dsn: str, driver: str, profile: Profile
) -> None:
    create = "CREATE TABLE probe_deferrable (name text NOT NULL UNIQUE DEFERRABLE)"
    missing = "SELECT to_regclass('probe_deferrable') IS NULL AS missing"

    async def scenario() -> None:
        source = await GuardedSource.open(driver, _guard_dsn, profile)
        try:
            async with source.lease() as s:
                await s.q("DROP TABLE IF EXISTS probe_deferrable")  # a failed earlier run's
                with pytest.raises(EmulationRejected, match="DEFERRABLE") as caught:
                    await s.q(create)
                assert caught.value.profile == profile.name
                assert caught.value.rule in ("deferrable", "deferrable-key")
                async with s.tx():
                    with pytest.raises(EmulationRejected):
                        await s.q(create)
                    # nothing was sent, so the transaction is not aborted
                    assert await s.one(missing) is True
                assert await s.one(missing) is True
        finally:
            await source.close()
        # the citus guard lets the same statement through, and it creates the table
        citus = await GuardedSource.open(driver, _guard_dsn, CITUS)
        try:
            async with citus.lease() as s:
                await s.q(create)
                assert await s.one(missing) is False
                await s.q("DROP TABLE probe_deferrable")
        finally:
            await citus.close()

    run(scenario())


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(
    ("profile", "level"),
    [(CRDB, "serializable"), (YB, "repeatable read"), (CITUS, None)],
    ids=["cockroachdb", "yugabytedb", "citus-distributed"],
)
def test_isolation_is_forced(
    _guard_dsn: str, driver: str, profile: Profile, level: str | None
) -> None:
    show = "SHOW transaction_isolation"

    async def scenario() -> None:
        source = await GuardedSource.open(driver, _guard_dsn, profile)
        try:
            for _ in range(2):  # a second borrow of the one pooled connection (asyncpg resets it)
                async with source.lease() as s:
                    assert await s.one(show) == (level or "read committed")
                    for asked in (None, Isolation.READ_COMMITTED, Isolation.REPEATABLE_READ):
                        async with s.tx(asked):
                            expected = level or (asked.value if asked else "read committed")
                            assert await s.one(show) == expected
                            async with s.tx(Isolation.SERIALIZABLE):  # a savepoint
                                assert await s.one(show) == expected
                    assert await s.one(show) == (level or "read committed")
        finally:
            await source.close()

    run(scenario())


@pytest.mark.parametrize("driver", DRIVERS)
def test_ints_come_back_as_text_on_cockroachdb(_guard_dsn: str, driver: str) -> None:
    sql = "SELECT 1 AS one, 2::bigint AS big, true AS flag, ARRAY[3, 4] AS arr, 'x' AS s"

    async def scenario() -> None:
        for profile, expected in (
            (CRDB, {"one": "1", "big": "2", "flag": True, "arr": ["3", "4"], "s": "x"}),
            (CITUS, {"one": 1, "big": 2, "flag": True, "arr": [3, 4], "s": "x"}),
        ):
            source = await GuardedSource.open(driver, _guard_dsn, profile)
            try:
                async with source.lease() as s:
                    assert await s.q(sql) == [expected]
                    async with s.tx():
                        assert await s.q(sql) == [expected]
            finally:
                await source.close()

    run(scenario())


@pytest.mark.parametrize("driver", DRIVERS)
def test_add_column_then_update(_guard_dsn: str, driver: str) -> None:
    async def scenario() -> None:
        source = await GuardedSource.open(driver, _guard_dsn, CRDB)
        try:
            async with source.lease() as s:
                await s.q("DROP TABLE IF EXISTS addcol")  # a failed earlier run's
                await s.q("CREATE TABLE addcol (id int PRIMARY KEY)")
                await s.q("INSERT INTO addcol (id) VALUES (1)")
                async with s.tx():
                    await s.q("ALTER TABLE addcol ADD COLUMN early int")
                    with pytest.raises(EmulationRejected, match="'early'") as caught:
                        await s.q("UPDATE addcol SET early = 1 WHERE id = $1", 1)
                    assert caught.value.rule == "add-column-then-update"
                    await s.q("UPDATE addcol SET id = 1 WHERE id = $1", 1)  # another column
                async with s.tx():
                    await s.q("ALTER TABLE addcol ADD COLUMN late int")
                async with s.tx():
                    await s.q("UPDATE addcol SET late = 2 WHERE id = $1", 1)
                assert await s.q("SELECT early, late FROM addcol") == [
                    {"early": None, "late": "2"}  # ints as text: this is cockroachdb
                ]
                await s.q("ALTER TABLE addcol ADD COLUMN auto int")  # autocommit: two transactions
                await s.q("UPDATE addcol SET auto = 3")
                await s.q("DROP TABLE addcol")
        finally:
            await source.close()

    run(scenario())


def test_docs_list_every_profiles_rules() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "engines.md").read_text()
    assert rules_section() in page, "regenerate docs/engines.md's 'Emulation guard rules'"
    for name in PROFILES:
        assert f"| `{rules_for(name)[0].id}` |" in rules_markdown(name)


def test_rules_for_names_the_capabilities_the_engines_lack() -> None:
    for name in PROFILES:
        lacking = set(engine_class(name).description.capabilities.lacking())
        enforced = {rule.capability for rule in rules_for(name) if rule.capability}
        assert enforced <= lacking, name
        assert enforced <= set(Capabilities().names())
    assert {r.capability for r in rules_for("citus-distributed")} == {
        None,
        "table_partitioning",
        "row_triggers",
    }
    with pytest.raises(KeyError, match="known: citus-distributed, cockroachdb"):
        rules_for("oracle")


def test_the_emulation_package_imports_no_driver() -> None:
    package = Path(__file__).resolve().parents[1] / "src/alkstore/engines/emulation"
    modules = sorted(package.glob("*.py"))
    assert {m.name for m in modules} >= {"lexer.py", "rules.py", "profiles.py", "guard.py"}
    for module in modules:
        text = module.read_text()
        assert not re.search(r"^\s*(from|import)\s+(\.\.\.|alkstore\.)drivers", text, re.M)
        assert len(text.splitlines()) < 500, module.name
