"""The citus-distributed profile: every rule's rejected statements and close look-alikes.

The function rules reproduce what a real Citus 13.2 cluster refused (SQLSTATE 0A000) while
the emulation let it through: each statement shape that failed there is a rejected case, and
each documented way around it (the value bound or computed once outside the UPDATE, an
IMMUTABLE CASE, a STABLE function without a column, a table that is not a Citus table) is an
accepted one.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from alkstore.core.options import Policy
from alkstore.core.targets import targets
from alkstore.engines.citus import CitusDistributedEngine
from alkstore.engines.citus_calls import claim_call, claim_function, queue_claim_maker
from alkstore.engines.emulation import CITUS_DISTRIBUTED, EmulationRejected, citus_distributed
from alkstore.engines.postgres.policies import keyed_claim_sql
from alkstore.engines.postgres.sql import seconds_after

CITUS = CITUS_DISTRIBUTED

# The statements a real Citus cluster refused (from the postgres engine and the harness).
FETCH_CLAIM = """WITH next AS (SELECT name, id FROM "s".job
                WHERE name = $1 AND state IN ('created', 'retry') AND start_after <= now()
                ORDER BY priority DESC, created_on, id LIMIT $2 FOR UPDATE SKIP LOCKED)
            UPDATE "s".job j SET state = 'active', started_on = now(),
                heartbeat_on = CASE WHEN j.heartbeat_seconds IS NULL THEN NULL ELSE now() END,
                retry_count = CASE WHEN j.started_on IS NULL THEN j.retry_count
                                   ELSE j.retry_count + 1 END
            FROM next WHERE j.name = next.name AND j.id = next.id
            RETURNING j.id, j.name, j.data::text AS data, j.state, j.retry_count"""
RESUME = """UPDATE "s".job j SET state = 'created', completed_on = NULL, start_after = now(),
                keep_until = now() + j.retention_seconds * interval '1 second'
            FROM (SELECT DISTINCT id FROM unnest($2::uuid[]) AS u(id)) t
            WHERE j.name = $1 AND j.id = t.id AND j.state IN ('cancelled')
            RETURNING j.id"""
EXPIRE_WHERE = """UPDATE "s".job j SET state = 'failed', completed_on = now()
            WHERE j.state = 'active'
              AND j.started_on + j.expire_seconds * interval '1 second' < now()"""
DELETE_FINISHED = """DELETE FROM "s".job
            WHERE state IN ('completed', 'failed') AND deletion_seconds > 0
              AND completed_on + deletion_seconds * interval '1 second' < now()
            RETURNING id"""
ADVANCE = (
    "UPDATE \"s\".job SET created_on = created_on - $1::float8 * interval '1 second', "
    "start_after = start_after - $1::float8 * interval '1 second'"
)
FAIL = """UPDATE "s".job j SET
                (state, start_after, completed_on) = (
                    SELECT CASE WHEN x.again THEN 'retry' ELSE 'failed' END, x.at,
                        CASE WHEN x.again THEN NULL ELSE now() END
                    FROM (SELECT j.retry_count < j.retry_limit AS again,
                                 now() + j.retry_delay * (1 + random()) * interval '1 second'
                                 AS at) x)
            FROM "s".queue sq WHERE sq.name = j.name AND j.name = $1 AND j.id = ANY($2::uuid[])
            RETURNING j.name, j.id, j.state"""

# Their Citus-clean rewrites: the time is bound, or computed once outside the UPDATE.
FETCH_CLAIM_CLEAN = """WITH next AS (SELECT name, id, now() AS at FROM "s".job
                WHERE name = $1 AND state IN ('created', 'retry') AND start_after <= now()
                ORDER BY priority DESC, created_on, id LIMIT $2 FOR UPDATE SKIP LOCKED)
            UPDATE "s".job j SET state = 'active', started_on = now(),
                heartbeat_on = CASE WHEN j.heartbeat_seconds IS NULL THEN NULL ELSE next.at END,
                retry_count = CASE WHEN j.started_on IS NULL THEN j.retry_count
                                   ELSE j.retry_count + 1 END
            FROM next WHERE j.name = $1 AND j.name = next.name AND j.id = next.id
            RETURNING j.id, j.name, j.data::text AS data, j.state, j.retry_count"""
RESUME_CLEAN = """UPDATE "s".job j SET state = 'created', completed_on = NULL, start_after = now(),
                keep_until = t.keep_until
            FROM (SELECT u.id, $3::timestamptz + r.s * interval '1 second' AS keep_until
                  FROM unnest($2::uuid[]) AS u(id), (SELECT 60 AS s) r) t
            WHERE j.name = $1 AND j.id = t.id RETURNING j.id"""
FAIL_CLEAN = """WITH x AS (SELECT $3::float8 * (1 + random()) AS delay)
            UPDATE "s".job j SET state = 'retry', start_after = $4::timestamptz
            FROM x WHERE j.name = $1 AND j.id = ANY($2::uuid[]) RETURNING j.id"""

REJECT: list[tuple[str, str, str]] = [
    # (rule, statement, text the error must name)
    (
        "row-lock-filter",
        "SELECT id FROM s.job WHERE state = 'created' LIMIT 5 FOR UPDATE SKIP LOCKED",
        'FOR UPDATE SKIP LOCKED on table "job" without an equality filter',
    ),
    (
        "row-lock-filter",
        "SELECT id FROM s.job j WHERE j.name = ANY($1::text[]) FOR UPDATE",
        'distribution column "name"',
    ),
    (
        "row-lock-filter",
        "SELECT d.id FROM s.job d JOIN s.queue q ON q.name = d.name WHERE q.name = $1 "
        "FOR UPDATE OF d",
        "FOR UPDATE OF d",
    ),
    (
        "distribution-column-update",
        "UPDATE s.job SET name = $2 WHERE name = $1 AND id = $3",
        'UPDATE of distribution column "name"',
    ),
    (
        "distribution-column-update",
        "UPDATE \"s\".job j SET (state, name) = ('created', $2) WHERE j.name = $1",
        'distribution column "name"',
    ),
    (
        "distribution-column-update",
        "INSERT INTO s.job (id, name) VALUES ($1, $2) "
        "ON CONFLICT (name, id) DO UPDATE SET name = excluded.name",
        'ON CONFLICT DO UPDATE of distribution column "name"',
    ),
    (
        "key-without-distribution-column",
        "CREATE TABLE s.job (id uuid PRIMARY KEY, name text NOT NULL)",
        "PRIMARY KEY on column 'id'",
    ),
    (
        "key-without-distribution-column",
        "CREATE TABLE s.job (id uuid, name text, CONSTRAINT job_pkey PRIMARY KEY (id))",
        "PRIMARY KEY (id)",
    ),
    (
        "key-without-distribution-column",
        "CREATE UNIQUE INDEX job_id ON s.job (id) INCLUDE (name)",
        "UNIQUE INDEX (id)",
    ),
    (
        "key-without-distribution-column",
        "CREATE UNIQUE INDEX job_lower ON s.job (lower(name), id)",
        "UNIQUE INDEX (id)",
    ),
    (
        "key-without-distribution-column",
        "ALTER TABLE s.job ADD CONSTRAINT job_singleton UNIQUE (singleton_key)",
        "UNIQUE (singleton_key)",
    ),
    (
        "triggers",
        "CREATE TRIGGER job_wake AFTER INSERT ON s.job FOR EACH ROW EXECUTE FUNCTION f()",
        "CREATE TRIGGER job_wake",
    ),
    (
        "triggers",
        "create or replace trigger t before update on s.queue execute function g()",
        "trigger t",
    ),
    ("mutable-in-case", FETCH_CLAIM, "now() in CASE"),
    (
        "mutable-in-case",
        'UPDATE "s".job SET keep_until = coalesce(keep_until, current_timestamp) WHERE name = $1',
        "current_timestamp in COALESCE",
    ),
    (
        "mutable-in-case",
        "UPDATE s.queue SET updated_on = CASE WHEN $2 THEN now() ELSE updated_on END "
        "WHERE name = $1",
        'in an UPDATE of "queue"',
    ),
    (
        # Refused by a real Citus 13 cluster: "non-IMMUTABLE functions are not allowed in
        # CASE or COALESCE statements".
        "mutable-in-case",
        "UPDATE s.job j SET output = (CASE WHEN jsonb_typeof(j.output) = 'object' "
        "THEN j.output ELSE jsonb_build_object('output', $2::text) END) WHERE j.name = $1",
        "jsonb_build_object",
    ),
    ("stable-with-column", RESUME, "timestamptz ± interval"),
    ("stable-with-column", EXPIRE_WHERE, "j.started_on + j.expire_seconds"),
    ("stable-with-column", DELETE_FINISHED, 'DELETE of "job"'),
    ("stable-with-column", ADVANCE, "created_on - $1::float8"),
    (
        "stable-with-column",
        "UPDATE job AS x SET singleton_on = date_trunc('hour', x.created_on) WHERE x.name = $1",
        "date_trunc",
    ),
    ("volatile-in-modification", FAIL, "random() in the SET clause"),
    (
        "volatile-in-modification",
        "UPDATE s.job SET id = gen_random_uuid() WHERE name = $1",
        "gen_random_uuid()",
    ),
    (
        "volatile-in-modification",
        "DELETE FROM s.job WHERE name = $1 AND random() < 0.5",
        "random() in the WHERE clause",
    ),
    (
        "mutable-returning",
        "UPDATE s.job j SET state = 'x' WHERE j.name = $1 RETURNING j.id, now() AS at",
        "now() in the RETURNING clause",
    ),
    (
        "mutable-returning",
        "INSERT INTO s.job (id, name) VALUES ($1, $2) RETURNING id, current_timestamp",
        'INSERT into "job"',
    ),
    ("partitioning", "CREATE TABLE s.job (id uuid, name text) PARTITION BY LIST (name)", "LIST"),
]

ACCEPT: list[tuple[str, str]] = [
    # (rule, statement): every rule of the profile must let it through
    ("row-lock-filter", "SELECT id FROM s.job WHERE $1::text = name FOR UPDATE"),
    ("row-lock-filter", "SELECT id FROM s.job j WHERE j.name = $1::text FOR SHARE"),
    ("row-lock-filter", 'SELECT name FROM "s".queue WHERE name = $1 FOR UPDATE'),
    ("row-lock-filter", "SELECT id FROM s.job WHERE note = 'FOR UPDATE'"),
    ("distribution-column-update", "UPDATE s.queue SET table_name = $2 WHERE name = $1"),
    (
        "distribution-column-update",
        "INSERT INTO s.job (id, name) VALUES ($1, $2) "
        "ON CONFLICT (name, id) DO UPDATE SET data = excluded.data",
    ),
    (
        "key-without-distribution-column",
        "CREATE UNIQUE INDEX job_singleton ON s.job (name, singleton_key)",
    ),
    ("key-without-distribution-column", "CREATE INDEX job_active ON s.job (started_on)"),
    (
        "key-without-distribution-column",
        "CREATE UNIQUE INDEX job_id ON ONLY s.job USING btree (name DESC, id)",
    ),
    ("triggers", "SELECT tgname FROM pg_trigger WHERE tgname <> 'CREATE TRIGGER x'"),
    ("triggers", "ALTER TABLE s.job DROP COLUMN trigger_at"),
    ("row-lock-filter", FETCH_CLAIM_CLEAN),
    ("distribution-column-update", FETCH_CLAIM_CLEAN),
    ("mutable-in-case", FETCH_CLAIM_CLEAN),
    # a multi-column SET from a sub-SELECT is a resjunk entry the planner does not examine
    ("mutable-in-case", FAIL.replace("random()", "0")),
    (
        "mutable-in-case",
        FETCH_CLAIM.replace("ELSE now() END", "ELSE $3::timestamptz END").replace(
            "WHERE j.name = next.name", "WHERE j.name = $1 AND j.name = next.name"
        ),
    ),
    ("mutable-in-case", "UPDATE s.version SET maintained_on = coalesce(maintained_on, now())"),
    ("mutable-in-case", "SELECT CASE WHEN heartbeat_seconds IS NULL THEN now() END FROM s.job"),
    ("stable-with-column", RESUME_CLEAN),
    ("stable-with-column", "UPDATE s.job j SET started_on = now() WHERE j.name = $1"),
    ("stable-with-column", "DELETE FROM s.job WHERE state = 'created' AND keep_until < now()"),
    (
        "stable-with-column",
        "UPDATE s.job j SET state = 'failed' WHERE j.started_on < now() - interval '1 hour'",
    ),
    (
        "stable-with-column",
        "UPDATE s.job j SET keep_until = $2::timestamptz, retry_count = j.retry_count + 1 "
        "WHERE j.name = $1 AND j.state IS DISTINCT FROM 'active'",
    ),
    ("stable-with-column", ADVANCE.replace('"s".job', '"s".version')),
    ("volatile-in-modification", FAIL_CLEAN),
    ("volatile-in-modification", "INSERT INTO s.job (id, name) VALUES (gen_random_uuid(), $1)"),
    (
        "volatile-in-modification",
        "INSERT INTO s.job (id, name) SELECT gen_random_uuid(), name FROM s.queue",
    ),
    ("volatile-in-modification", "UPDATE s.migration_lock SET token = random()"),
    ("mutable-returning", "UPDATE s.job j SET state = 'x' WHERE j.name = $1 RETURNING j.id"),
    ("mutable-returning", "INSERT INTO s.version (version) VALUES ($1) RETURNING now()"),
    ("partitioning", "SELECT rank() OVER (PARTITION BY name ORDER BY id) FROM s.job"),
]


# The engine's own statements as they are now: times shifted by IMMUTABLE UTC arithmetic
# (seconds_after), the jitter bound per target. A real Citus 13.2.2 cluster accepted each.
_ENGINE = CitusDistributedEngine("s")
_SHIFTED_DEADLINE = seconds_after("j.started_on", "j.expire_seconds")
_NOTIFYING_SEND = """WITH changed AS (INSERT INTO "s".job (id, name) SELECT t.id, $1
        FROM unnest($2::uuid[]) AS t(id) RETURNING id, name),
    note AS (SELECT pg_notify($3::text, p.queue) FROM (SELECT DISTINCT name AS queue
        FROM changed) p)
    SELECT changed.* FROM changed CROSS JOIN (SELECT count(*) AS n FROM note) n"""
_SCHEDULE_UPSERT = """INSERT INTO "s".schedule (name, key, cron) VALUES ($1, $2, $3)
    ON CONFLICT (name, key) DO UPDATE SET cron = EXCLUDED.cron, updated_on = now()"""
_KEY_WALK = keyed_claim_sql('"s"', Policy.SINGLETON, ignore_start_after=False, grouped=True)
ACCEPT += [
    # the statements as the engine now writes them: a boolean column, now() in VALUES
    ("void-cte-column", _NOTIFYING_SEND.replace("p.queue) FROM", "p.queue) IS NULL AS sent FROM")),
    ("void-cte-column", "SELECT pg_notify($1::text, $2::text)"),
    (
        "mutable-in-do-update",
        _SCHEDULE_UPSERT.replace("updated_on = now()", "updated_on = EXCLUDED.updated_on"),
    ),
    (
        "mutable-in-do-update",
        "INSERT INTO s.elsewhere (k) VALUES ($1) ON CONFLICT (k) DO UPDATE SET at = now()",
    ),
    # the same statement routed to one shard goes to its worker whole
    ("mutable-subquery-across-shards", FAIL.replace("random()", "0")),
    (
        "mutable-subquery-across-shards",
        "UPDATE s.job j SET data = (SELECT q.data FROM s.queue q WHERE q.created_on < now())",
    ),
    ("mutable-in-case", _ENGINE._claim_sql("fetch", True, one=False, queue="q")),
    # the keyed claim's key walk, its UPDATE routed to the queue's shard
    ("recursive-cte-across-shards", _KEY_WALK),
    ("stable-with-column", _ENGINE._claim_sql("fetch", True, one=False, queue="q")),
    ("stable-with-column", f"UPDATE s.job j SET state = 'x' WHERE {_SHIFTED_DEADLINE} < now()"),
    (
        "stable-with-column",
        f"DELETE FROM s.job WHERE {seconds_after('completed_on', 'deletion_seconds')} < now()",
    ),
    ("stable-with-column", _ENGINE._retry_update("t", "j.name = $1", "$2", "$3", "$1")),
    ("volatile-in-modification", _ENGINE._retry_update("t", "j.name = $1", "$2", "$3", "$1")),
    ("mutable-in-case", _ENGINE._retry_update("t", "j.name = $1", "$2", "$3", "$1")),
    ("mutable-in-case", _ENGINE._refused_note()),
    ("stable-with-column", _ENGINE._refused_note()),
    # the conformance harness's clock: every timestamp shifted back by a bound amount
    ("stable-with-column", f"UPDATE s.job SET created_on = {seconds_after('created_on', '-$1')}"),
]
REJECT += [
    # refused by a real Citus 13.2.2 cluster: the UPDATE found the walk's rows by id only
    (
        "recursive-cte-across-shards",
        _KEY_WALK.replace("WHERE j.name = $1 AND j.id = ANY", "WHERE j.id = ANY"),
        "a recursive CTE in an UPDATE",
    ),
    # both refused by a real Citus 13.2.2 cluster (0A000 and 42P16)
    ("void-cte-column", _NOTIFYING_SEND, "pg_notify(…) as a column"),
    ("mutable-in-do-update", _SCHEDULE_UPSERT, 'INSERT into "schedule"'),
    # fail's old statement, run by expiry across shards: refused by the pushdown planner
    (
        "mutable-subquery-across-shards",
        FAIL.replace("random()", "0").replace("AND j.name = $1 ", ""),
        "now() in a sub-SELECT without FROM",
    ),
    # timezone() of a timestamptz sum: the sum itself is STABLE and takes a column.
    (
        "stable-with-column",
        "UPDATE s.job j SET keep_until = timezone('UTC', now() + j.retention_seconds "
        "* interval '1 second') WHERE j.name = $1",
        "timestamptz ± interval",
    ),
    # A timestamp sum is IMMUTABLE, but now() inside CASE is still refused.
    (
        "mutable-in-case",
        f"UPDATE s.job j SET start_after = CASE WHEN j.retry_backoff THEN "
        f"{seconds_after('now()', 'j.retry_delay')} ELSE j.start_after END WHERE j.name = $1",
        "now() in CASE",
    ),
]

# The hot path's statements on a real Citus 13.2.2 cluster (EXPLAIN, see the rule's source):
# one task when every part is of queue $1, more (and shard locks) when a part is not.
_COMPLETION = """UPDATE "s".job j SET state = 'completed', completed_on = now()
        FROM unnest($2::uuid[]) AS t(id) WHERE j.name = $1 AND j.id = t.id
        RETURNING j.name, j.id, j.flow_parent"""
_RELEASE = """UPDATE "s".job j SET start_after = now() FROM flow_ready r
        WHERE j.name = r.name AND j.id = r.id RETURNING j.id"""
_UNBLOCK = """UPDATE "s".job_blocked b SET waiting = b.waiting - 1
        FROM done d WHERE b.name = d.name AND b.id = d.id RETURNING b.name, b.id"""
REJECT += [
    # the claim re-finding the picked rows by the picked names only: Task Count 32
    ("spread-from-one-shard", FETCH_CLAIM.replace("now() END", "$3 END"), 'UPDATE of "job"'),
    # the completion releasing flow jobs of any queue in the same statement: Task Count 4
    (
        "spread-from-one-shard",
        f"WITH done AS ({_COMPLETION}), flow_ready AS (SELECT name, id FROM done) {_RELEASE}",
        'UPDATE of "job" without "name = $n"',
    ),
    # a routed completion that writes a reference table: its shard locked on every node
    (
        "spread-from-one-shard",
        f"WITH done AS ({_COMPLETION}) UPDATE s.queue SET paused = false WHERE name = $1",
        'reference table "queue"',
    ),
]


def _fail_statement(where: str, queue: str, names: str = "") -> str:
    """The first statement of ``fail`` (or, with the targets' ``names``, expiry) over
    targets ``t`` matching ``where``."""
    source = f"unnest({names}$2::uuid[], $3::int[], $4::float8[]) AS t(id, retry_count, jitter)"
    if names:
        source = source.replace("t(id", "t(name, id")
    steps = _ENGINE._fail_steps(source, where, "$5", queue, ())
    return next(steps).sql


def _snooze_statement() -> str:
    steps = _ENGINE.snooze("q", targets([uuid.uuid4()]), 5).steps()
    return next(steps).sql


_FAIL_ONE_QUEUE = _fail_statement("j.name = $1 AND j.id = t.id", "$1")
REJECT += [
    # fail's stately retry slot read by o.name = j.name: each UPDATE a subplan, Task Count 32
    # (snooze's UPDATE: Task Count 32)
    (
        "spread-from-one-shard",
        _fail_statement("j.name = $1 AND j.id = t.id", "j.name"),
        'sub-SELECT of "job"',
    ),
    (
        "spread-from-one-shard",
        _snooze_statement().replace("o.name = $1", "o.name = j.name"),
        'sub-SELECT of "job"',
    ),
]
# a routed UPDATE with its NOTIFY in a CTE: sent on the worker (0 notifications arrived)
_ROUTED_NOTIFY = """WITH changed AS (UPDATE "s".job j SET priority = priority + 1
        WHERE j.name = $1 AND j.id = $2 RETURNING j.name),
    note AS (SELECT pg_notify('chan', p.queue) IS NULL AS sent
        FROM (SELECT DISTINCT $1::text AS queue FROM changed) p)
    SELECT changed.* FROM changed CROSS JOIN (SELECT count(*) AS n FROM note) n"""
REJECT += [("notify-from-one-shard", _ROUTED_NOTIFY, "pg_notify(…) in a statement whose UPDATE")]
ACCEPT += [
    # send's INSERT … SELECT runs through the coordinator: its notification arrives
    ("notify-from-one-shard", _NOTIFYING_SEND.replace("p.queue) FROM", "p.queue) IS NULL FROM")),
    ("notify-from-one-shard", "SELECT pg_notify($1::text, $2::text) IS NULL AS sent"),
]
ACCEPT += [
    # the same with o.name = $1: Task Count 1 for every part
    ("spread-from-one-shard", _FAIL_ONE_QUEUE),
    ("spread-from-one-shard", _snooze_statement()),
    # expiry: the targets' names bound as an array, no part routed (maintenance)
    (
        "spread-from-one-shard",
        _fail_statement("j.name = t.name AND j.id = t.id", "j.name", names="$1::text[], "),
    ),
    ("spread-from-one-shard", FETCH_CLAIM_CLEAN),
    ("spread-from-one-shard", _COMPLETION),
    # across shards by design, no part routed: maintenance
    ("spread-from-one-shard", _RELEASE.replace("FROM flow_ready r", "FROM s.job_blocked r")),
    # the flows' own completion, run only for a flow parent's completion
    (
        "spread-from-one-shard",
        f"WITH done AS ({_COMPLETION}), u AS ({_UNBLOCK}), "
        f"flow_ready AS (SELECT name, id FROM u) {_RELEASE}",
    ),
]


# The claim function sharded Citus delegates to the queue's worker: every statement of its body
# filters j.name = $1 (the queue argument) and reads one table (Task Count: 1 on a real
# cluster). The pick filtered by the argument's name instead is no filter the guard can route.
_CLAIM_FUNCTION = claim_function('"s"')
REJECT += [
    (
        "row-lock-filter",
        _CLAIM_FUNCTION.replace(
            "WHERE j.name = $1 AND j.state IN", "WHERE j.name = q AND j.state IN"
        ),
        "FOR UPDATE SKIP LOCKED",
    )
]
ACCEPT += [("row-lock-filter", _CLAIM_FUNCTION), ("spread-from-one-shard", _CLAIM_FUNCTION)]
# A queue's own copy of it, made on the server from that body, and its call (Task Count: 1).
ACCEPT += [
    ("row-lock-filter", queue_claim_maker('"s"')),
    ("spread-from-one-shard", claim_call('"s"', "id", "$1::text, 1, $2, $3, $4", "q")),
]


def _params(cases: list[Any]) -> list[Any]:
    return [pytest.param(*case, id=case[0]) for case in cases]


@pytest.mark.parametrize(("rule", "sql", "construct"), _params(REJECT))
def test_rule_rejects(rule: str, sql: str, construct: str) -> None:
    assert CITUS.rule(rule).check(sql) is not None, f"{rule} missed"
    error = CITUS.violation(sql)
    assert isinstance(error, EmulationRejected)
    assert error.rule == rule
    assert construct.lower() in str(error).lower()


@pytest.mark.parametrize(("rule", "sql"), _params(ACCEPT))
def test_rule_accepts_look_alike(rule: str, sql: str) -> None:
    assert CITUS.rule(rule).check(sql) is None
    assert CITUS.violation(sql) is None


def test_every_rule_has_a_rejected_and_an_accepted_case() -> None:
    ids = {rule.id for rule in CITUS.rules}
    assert {rule for rule, _, _ in REJECT} == ids
    assert {rule for rule, _ in ACCEPT} == ids


def test_function_rules_cite_the_router_planner() -> None:
    for rule_id in ("volatile-in-modification", "stable-with-column", "mutable-in-case"):
        assert CITUS.rule(rule_id).source.endswith("planner/multi_router_planner.c")


def test_citus_profile_for_other_tables() -> None:
    profile = citus_distributed("events", "tenant", reference=("tenants",))
    assert profile.violation("SELECT id FROM events WHERE tenant = $1 FOR UPDATE") is None
    error = profile.violation("SELECT id FROM events WHERE name = $1 FOR UPDATE")
    assert error is not None and 'distribution column "tenant"' in str(error)
    assert profile.violation("SELECT id FROM s.job WHERE state = 'x' FOR UPDATE") is None
    assert profile.violation(RESUME) is None
    assert profile.violation("UPDATE tenants SET seen = coalesce(seen, now())") is not None
