"""The versioned schema: numbered forward migrations, each a list of DDL statements.

DDL is built from the engine's capabilities (partitioning, covering indexes, PL/pgSQL), never
from its name. The schema name is the only identifier interpolated, and it arrives quoted by
:func:`~.identifiers.quote_schema`.
"""

from __future__ import annotations

from collections.abc import Callable

from ...core.capabilities import Capabilities
from ...core.states import FINISHED, QUEUED, JobState, sql_list

Migration = Callable[[str, Capabilities], list[str]]


DEFAULT_PARTITION = "job_default"
"""The partition of the job table for queues without a partition of their own."""


def rows_table(caps: Capabilities) -> str:
    """The table that holds the jobs of a queue without its own partition (unquoted)."""
    return DEFAULT_PARTITION if caps.table_partitioning else "job"


def in_list(states: frozenset[JobState]) -> str:
    """A SQL ``IN`` list of state names (constants of the core, never user input)."""
    return "(" + ", ".join(f"'{s}'" for s in sql_list(states)) + ")"


def _v1(s: str, caps: Capabilities) -> list[str]:
    partition_by = " PARTITION BY LIST (name)" if caps.table_partitioning else ""
    include = " INCLUDE (start_after)" if caps.covering_indexes else ""
    all_states = in_list(frozenset(JobState))
    ddl = [
        f"""CREATE TABLE {s}.version (
            version int NOT NULL,
            installed_on timestamptz NOT NULL DEFAULT now(),
            maintained_on timestamptz
        )""",
        f"""CREATE TABLE {s}.queue (
            name text PRIMARY KEY,
            policy text NOT NULL DEFAULT 'standard',
            retry_limit int NOT NULL,
            retry_delay int NOT NULL,
            retry_backoff bool NOT NULL,
            retry_delay_max int,
            expire_seconds int NOT NULL,
            heartbeat_seconds int,
            retention_seconds int NOT NULL,
            deletion_seconds int NOT NULL,
            dead_letter text CONSTRAINT queue_dead_letter_fkey REFERENCES {s}.queue (name),
            partition bool NOT NULL DEFAULT false,
            table_name text,
            created_on timestamptz NOT NULL DEFAULT now(),
            updated_on timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT queue_dead_letter_not_self CHECK (dead_letter IS DISTINCT FROM name)
        )""",
        f"""CREATE TABLE {s}.job (
            id uuid NOT NULL,
            name text NOT NULL,
            priority int NOT NULL DEFAULT 0,
            data jsonb,
            state text NOT NULL DEFAULT 'created',
            retry_limit int NOT NULL,
            retry_count int NOT NULL DEFAULT 0,
            retry_delay int NOT NULL,
            retry_backoff bool NOT NULL,
            retry_delay_max int,
            expire_seconds int NOT NULL,
            heartbeat_seconds int,
            retention_seconds int NOT NULL,
            deletion_seconds int NOT NULL,
            policy text,
            singleton_key text,
            singleton_on timestamptz,
            group_id text,
            group_tier text,
            start_after timestamptz NOT NULL DEFAULT now(),
            created_on timestamptz NOT NULL DEFAULT now(),
            started_on timestamptz,
            completed_on timestamptz,
            heartbeat_on timestamptz,
            keep_until timestamptz NOT NULL,
            output jsonb,
            source_queue text,
            source_id uuid,
            source_retry_count int,
            CONSTRAINT job_pkey PRIMARY KEY (name, id),
            CONSTRAINT job_state_check CHECK (state IN {all_states})
        ){partition_by}""",
    ]
    if caps.table_partitioning:
        ddl.append(f"CREATE TABLE {s}.{DEFAULT_PARTITION} PARTITION OF {s}.job DEFAULT")
    ddl += [
        f"""CREATE INDEX job_fetch ON {s}.job (name, priority DESC, created_on, id){include}
            WHERE state IN {in_list(QUEUED)}""",
        f"CREATE INDEX job_active ON {s}.job (name, started_on) WHERE state = 'active'",
        f"CREATE INDEX job_finished ON {s}.job (completed_on) WHERE state IN {in_list(FINISHED)}",
        f"CREATE INDEX job_retention ON {s}.job (keep_until) WHERE state IN {in_list(QUEUED)}",
    ]
    if caps.table_partitioning and caps.plpgsql:
        # A partition's bound must be a literal; the function quotes the bound queue name
        # with format('%L') so the value still arrives as a parameter.
        ddl.append(
            f"""CREATE FUNCTION {s}.create_queue_partition(schema_name text, queue_name text,
                                                        table_name text)
            RETURNS void LANGUAGE plpgsql AS $fn$
            BEGIN
              EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.job FOR VALUES IN (%L)',
                             schema_name, table_name, schema_name, queue_name);
            END
            $fn$"""
        )
    return ddl


def _v2(s: str, caps: Capabilities) -> list[str]:
    """The worker runtime: the supervisor's claim row, cron schedules, pub/sub subscriptions.

    Plain tables (no column of the job table is added, so nothing is backfilled); a
    schedule or subscription goes with its queue.
    """
    return [
        f"""CREATE TABLE {s}.supervisor (
            name text PRIMARY KEY,
            next_on timestamptz NOT NULL,
            run_on timestamptz,
            owner text
        )""",
        f"INSERT INTO {s}.supervisor (name, next_on) VALUES ('maintenance', now())",
        f"""CREATE TABLE {s}.schedule (
            name text NOT NULL CONSTRAINT schedule_queue_fkey
                REFERENCES {s}.queue (name) ON DELETE CASCADE,
            key text NOT NULL,
            cron text NOT NULL,
            tz text NOT NULL,
            data jsonb,
            options jsonb NOT NULL,
            missed text NOT NULL,
            last_slot timestamptz,
            created_on timestamptz NOT NULL DEFAULT now(),
            updated_on timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT schedule_pkey PRIMARY KEY (name, key)
        )""",
        f"""CREATE TABLE {s}.subscription (
            event text NOT NULL,
            queue text NOT NULL CONSTRAINT subscription_queue_fkey
                REFERENCES {s}.queue (name) ON DELETE CASCADE,
            created_on timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT subscription_pkey PRIMARY KEY (event, queue)
        )""",
    ]


SINGLETON_KEY = "(coalesce(singleton_key, ''))"
"""A job's policy key: a missing ``singleton_key`` is one shared key (the empty string, which
``send`` never accepts as a key of its own)."""


def _v3(s: str, caps: Capabilities) -> list[str]:
    """Queue policies, throttling, pause and the queue-wide active limit (docs/queues.md).

    The policies are partial unique indexes on the job table (the job carries its queue's
    policy, copied at send). Every one starts with ``name``: the partition key of the job
    table and the distribution column of sharded Citus. A send a policy refuses is an
    ``ON CONFLICT DO NOTHING``, never an error.
    """
    k = SINGLETON_KEY
    return [
        f"ALTER TABLE {s}.queue ADD COLUMN concurrency_limit int",
        f"ALTER TABLE {s}.queue ADD COLUMN paused bool NOT NULL DEFAULT false",
        f"""CREATE UNIQUE INDEX job_policy_short ON {s}.job (name, {k})
            WHERE state = 'created' AND policy = 'short'""",
        f"""CREATE UNIQUE INDEX job_policy_active ON {s}.job (name, {k})
            WHERE state = 'active' AND policy IN ('singleton', 'stately', 'key_strict_fifo')""",
        f"""CREATE UNIQUE INDEX job_policy_stately ON {s}.job (name, state, {k})
            WHERE state IN ('created', 'retry') AND policy = 'stately'""",
        f"""CREATE UNIQUE INDEX job_policy_exclusive ON {s}.job (name, {k})
            WHERE state IN ('created', 'retry', 'active') AND policy = 'exclusive'""",
        f"""CREATE UNIQUE INDEX job_throttle ON {s}.job (name, singleton_on, {k})
            WHERE singleton_on IS NOT NULL AND state <> 'cancelled'""",
        # The claim of the keyed policies walks the keys, then probes each key's head.
        f"""CREATE INDEX job_policy_keys ON {s}.job (name, {k}, priority DESC, created_on, id)
            WHERE state IN {in_list(QUEUED)} AND policy IN ('singleton', 'stately')""",
        f"""CREATE INDEX job_policy_fifo ON {s}.job (name, {k}, created_on, id)
            WHERE state IN {in_list(QUEUED)} AND policy = 'key_strict_fifo'""",
        f"""CREATE INDEX job_policy_blocked ON {s}.job (name, {k})
            WHERE state IN ('active', 'failed') AND policy = 'key_strict_fifo'""",
    ]


def _v4(s: str, caps: Capabilities) -> list[str]:
    """Dead-letter lineage and per-job dead-letter queue columns, and flows (job
    dependencies).

    The new job columns are nullable and nothing is backfilled (so engines without
    ``add_column_backfill`` take it in one transaction). ``job_dependency`` holds one row per
    edge of a flow (child ``name``/``id`` waits for ``parent_name``/``parent_id``) and
    ``job_blocked`` one row per child still waiting: how many parents have not completed and
    the start delay it keeps until then (the blocked job itself waits with ``start_after =
    'infinity'``, which no claim, index scan or retention pass reaches). On sharded Citus
    ``job_dependency`` (one flow's edges span queues) is a reference table and ``job_blocked``
    is distributed by the waiting job's queue beside the job table (see
    ``CitusDistributedEngine.after_install``).
    """
    return [
        f"""ALTER TABLE {s}.job ADD COLUMN source_root_id uuid,
            ADD COLUMN source_created_on timestamptz, ADD COLUMN source_output jsonb,
            ADD COLUMN dead_letter text, ADD COLUMN flow_parent bool""",
        f"""CREATE TABLE {s}.job_dependency (
            name text NOT NULL,
            id uuid NOT NULL,
            parent_name text NOT NULL,
            parent_id uuid NOT NULL,
            CONSTRAINT job_dependency_pkey PRIMARY KEY (name, id, parent_name, parent_id)
        )""",
        f"CREATE INDEX job_dependency_parent ON {s}.job_dependency (parent_name, parent_id)",
        f"""CREATE TABLE {s}.job_blocked (
            name text NOT NULL,
            id uuid NOT NULL,
            waiting int NOT NULL,
            start_at timestamptz,
            delay float8,
            CONSTRAINT job_blocked_pkey PRIMARY KEY (name, id)
        )""",
    ]


def _v5(s: str, caps: Capabilities) -> list[str]:
    """The sender's trace context, carried in the job (docs/observability.md).

    One nullable column, no default and no index: nothing is backfilled or rewritten, and a
    job sent without telemetry leaves it NULL.
    """
    return [f"ALTER TABLE {s}.job ADD COLUMN trace_context jsonb"]


def _v6(s: str, caps: Capabilities) -> list[str]:
    """Attempt history and result wake-ups (docs/workers.md, "Attempt history" and
    "Waiting for a result").

    ``errors`` holds each failed attempt's error, appended by the statement that fails the
    job. ``waited`` is set by ``wait`` on the job it waits for; where the server has
    LISTEN/NOTIFY, PL/pgSQL and row triggers on the job table (not sharded Citus), a trigger
    then notifies the schema's result channel (payload: the job id) when that job finishes.
    Its ``WHEN`` reads the new row only, so settling a job nobody waits for queues no trigger
    event and sends nothing. Two nullable columns, no
    default: nothing is backfilled, and a job that never failed leaves ``errors`` NULL (read
    as no errors). Version 15 replaces the trigger: the finishing statements notify.
    """
    ddl = [f"ALTER TABLE {s}.job ADD COLUMN errors jsonb, ADD COLUMN waited bool"]
    if caps.notifies_results:
        # The channel is computed from the table's schema, as done_channel() computes it.
        ddl += [
            f"""CREATE FUNCTION {s}.notify_result() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN
              PERFORM pg_notify(CASE WHEN length(TG_TABLE_SCHEMA) <= {RESULT_CHANNEL_ROOM}
                  THEN '{RESULT_CHANNEL}' || TG_TABLE_SCHEMA
                  ELSE '{RESULT_CHANNEL}' || left(md5(TG_TABLE_SCHEMA), 32) END,
                NEW.id::text);
              RETURN NULL;
            END
            $fn$""",
            f"""CREATE TRIGGER job_result AFTER UPDATE OF state ON {s}.job FOR EACH ROW
            WHEN (NEW.waited AND NEW.state IN {in_list(FINISHED)})
            EXECUTE FUNCTION {s}.notify_result()""",
        ]
    return ddl


RESULT_CHANNEL = "alkstore_done_"
"""The prefix of a schema's result channel (see :func:`_v6`)."""
RESULT_CHANNEL_ROOM = 63 - len(RESULT_CHANNEL)
"""The longest schema name a result channel spells out (a longer one is hashed)."""


def _v7(s: str, caps: Capabilities) -> list[str]:
    """Paused schedules and the worker processes' records (docs/cli.md).

    ``schedule.paused_on``: since when a schedule is paused, NULL while it fires.
    ``supervisor.info``: what a process running workers recorded of itself (host, pid,
    queues, how many workers) in its row ``process:OWNER``; the ``maintenance`` row leaves
    it NULL. Nullable, no default: nothing is backfilled."""
    return [
        f"ALTER TABLE {s}.schedule ADD COLUMN paused_on timestamptz",
        f"ALTER TABLE {s}.supervisor ADD COLUMN info jsonb",
    ]


def _v8(s: str, caps: Capabilities) -> list[str]:
    """Per-queue counters (docs/dashboard.md, "Counters"): ``queue_counter`` holds one row
    per queue, written only by the maintenance pass, and ``version.counted_until`` the
    watermark the counters have reached (NULL: none yet, so the first pass counts every
    event the job table still holds). No job column is added: the counted events are read
    from the jobs' own timestamps (see :mod:`.counters`)."""
    counts = ", ".join(
        f"{event} int8 NOT NULL DEFAULT 0"
        for event in ("sent", "completed", "failed", "retried", "expired", "dead_lettered")
    )
    return [
        f"ALTER TABLE {s}.version ADD COLUMN counted_until timestamptz",
        f"CREATE TABLE {s}.queue_counter (name text PRIMARY KEY, {counts})",
    ]


RETENTION_BOUND = "keep_until < 'infinity'"
"""The clause that keeps ``job_retention`` out of every plan but the retention pass's."""


def _v9(s: str, caps: Capabilities) -> list[str]:
    """``job_retention`` covers only the queued jobs that can expire (docs/benchmarks.md,
    "A claim planned without statistics").

    With the predicate of ``job_fetch`` (``state IN`` the queued states) it was a second
    index the claim could walk: a plan made while the statistics counted no queued job
    walked it whole, with no index condition, and sorted what it found; under a held
    transaction that visited every dead queued version on every claim. A predicate the
    claim does not imply leaves it to the retention pass, whose ``DELETE`` states the same
    clause. Jobs with ``keep_until = 'infinity'`` (flow jobs waiting for a parent) never
    expire, so they need no entry.
    """
    return [
        f"DROP INDEX {s}.job_retention",
        f"""CREATE INDEX job_retention ON {s}.job (keep_until)
            WHERE state IN {in_list(QUEUED)} AND {RETENTION_BOUND}""",
    ]


def _v10(s: str, caps: Capabilities) -> list[str]:
    """No table changes: at this version sharded Citus gains the function its hot path calls
    and distributes ``job_blocked`` beside the job table instead of as a reference table
    (``CitusDistributedEngine.after_upgrade``, :data:`CLAIM_FUNCTION_VERSION`), which only an
    engine knowing it is on Citus can do."""
    return []


CLAIM_FUNCTION_VERSION = 10
"""The version from which a sharded Citus schema has its claim function
(:mod:`alkstore.engines.citus_calls`)."""


GATE_FUNCTION = "claim_gate"
"""The function of the gated claim (:mod:`.claim_gate`), in the job schema from version 11."""


def _v11(s: str, caps: Capabilities) -> list[str]:
    """The gated claim's function (:mod:`.claim_gate`, docs/benchmarks.md "Claim scaling").

    It prepares the claim statement ``claim`` in the session once (a prepared statement
    named by the statement's hash, so the server keeps its plan as for an ungated claim),
    then takes the first free one of ``slots`` transaction advisory locks ``(gate, slot)``,
    or else waits on one (the store's ``lock_timeout`` bounds the wait), and then runs the
    prepared claim with the queue, limit and, for a completion (``ids`` not NULL), its
    targets and output. The values reach the statement as literals quoted by ``format``'s
    ``%L``. A statement of a volatile function takes its snapshot when it starts, so the
    claim sees every claim that held the slot before it committed. ``SETOF record``: the
    caller names the columns of the rows, so the function does not change when they do.
    Installed where the server has advisory locks and PL/pgSQL."""
    if not (caps.advisory_locks and caps.plpgsql):
        return []
    return [
        f"""CREATE FUNCTION {s}.{GATE_FUNCTION}(gate int, slots int, claim text, q text,
                lim bigint, ids uuid[], rcs int[], out_json text)
        RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $fn$
        DECLARE
          prepared text := 'alkstore_gate_' || md5(claim);
          call text;
        BEGIN
          IF NOT EXISTS (SELECT FROM pg_prepared_statements p WHERE p.name = prepared) THEN
            EXECUTE format('PREPARE %I AS %s', prepared, claim);
          END IF;
          IF ids IS NULL THEN
            call := format('EXECUTE %I(%L, %L)', prepared, q, lim);
          ELSE
            call := format('EXECUTE %I(%L, %L, %L, %L, %L)', prepared, q, lim, ids, rcs,
                           out_json);
          END IF;
          FOR slot IN 0 .. slots - 1 LOOP
            IF pg_try_advisory_xact_lock(gate, slot) THEN
              RETURN QUERY EXECUTE call;
              RETURN;
            END IF;
          END LOOP;
          PERFORM pg_advisory_xact_lock(gate, pg_backend_pid() % slots);
          RETURN QUERY EXECUTE call;
        END
        $fn$"""
    ]


def _v12(s: str, caps: Capabilities) -> list[str]:
    """No table changes: at this version each queue of sharded Citus gets a claim function
    of its own (``CitusDistributedEngine.after_upgrade``, :data:`QUEUE_CLAIMS_VERSION`)."""
    return []


QUEUE_CLAIMS_VERSION = 12
"""The version from which each queue of a sharded Citus schema has its own claim function
(:func:`alkstore.engines.citus_calls.queue_claim_maker`)."""


def _v13(s: str, caps: Capabilities) -> list[str]:
    """No table changes: at this version sharded Citus gains the function of its plain send
    (``CitusDistributedEngine.after_upgrade``, :data:`SEND_FUNCTION_VERSION`)."""
    return []


SEND_FUNCTION_VERSION = 13
"""The version from which a sharded Citus schema has its send function
(:mod:`alkstore.engines.citus_send`)."""


FLOW_PARENTS_VERSION = 14
"""The version from which the queue row says whether any of its jobs may be a flow parent
(``queue.flow_parents``)."""


def _v14(s: str, caps: Capabilities) -> list[str]:
    """``queue.flow_parents``: whether any job of the queue may be a flow parent, so that a
    completion looks its targets up for flow parents only in such a queue (a second primary-key
    lookup of every completed job: 3.3 µs of the server's CPU a job, docs/benchmarks.md "The
    flow-parent check"). A flow sets it on its parents' queues in its own transaction, so a
    completion that can see a flow parent sees the flag too; it is never cleared (a flag
    cleared beside a flow being made could miss the flow's parents). The queues that exist
    now get ``true``, not knowing; ``create_queue`` gives a new one ``false``. One statement
    and no write of the column in it: CockroachDB refuses a write to a column added in the
    same transaction. A process of an older alkstore makes flows without setting the flag:
    stop them before new queues take flows (docs/deployment.md, "Upgrading")."""
    return [
        f"ALTER TABLE {s}.queue ADD COLUMN IF NOT EXISTS flow_parents bool NOT NULL DEFAULT true"
    ]


def _v15(s: str, caps: Capabilities) -> list[str]:
    """The statements that finish a job notify its waiters themselves, in place of the
    ``job_result`` trigger (version 6): a row trigger after UPDATE makes the server fetch
    the old version of every row each claim and each completion changes, though the
    trigger's ``WHEN`` lets almost none through (2.9 buffer hits a job, 7 % of the server's
    CPU at 100 a fetch: docs/benchmarks.md, "The result trigger: gone from the hot path").
    Each finishing UPDATE now returns ``result_note(id, tableoid)`` of the rows marked
    ``waited`` only (:func:`~.sql.result_note`): the function notifies the result channel of
    the row's schema. A process of an older alkstore finishes jobs without notifying: the
    waiters' next reads find them (docs/deployment.md, "Upgrading")."""
    if not caps.notifies_results:
        return []
    return [
        f"DROP TRIGGER IF EXISTS job_result ON {s}.job",
        f"DROP FUNCTION IF EXISTS {s}.notify_result()",
        f"""CREATE OR REPLACE FUNCTION {s}.result_note(job_id uuid, job_table oid) RETURNS bool
        LANGUAGE plpgsql AS $fn$
        DECLARE
          schema_name text := (SELECT n.nspname FROM pg_class c
                               JOIN pg_namespace n ON n.oid = c.relnamespace
                               WHERE c.oid = job_table);
        BEGIN
          PERFORM pg_notify(CASE WHEN length(schema_name) <= {RESULT_CHANNEL_ROOM}
              THEN '{RESULT_CHANNEL}' || schema_name
              ELSE '{RESULT_CHANNEL}' || left(md5(schema_name), 32) END,
            job_id::text);
          RETURN true;
        END
        $fn$""",
        # Every finishing statement names the function, called or not, and PostgreSQL checks
        # EXECUTE when the statement starts: a schema whose default privileges revoke it
        # from PUBLIC must not stop the application's role from completing jobs.
        f"GRANT EXECUTE ON FUNCTION {s}.result_note(uuid, oid) TO PUBLIC",
    ]


MIGRATIONS: dict[int, Migration] = {
    1: _v1,
    2: _v2,
    3: _v3,
    4: _v4,
    5: _v5,
    6: _v6,
    7: _v7,
    8: _v8,
    9: _v9,
    10: _v10,
    11: _v11,
    12: _v12,
    13: _v13,
    14: _v14,
    15: _v15,
}
"""version -> the DDL that brings the schema from version - 1 to it."""

LATEST = max(MIGRATIONS)
"""The schema version this library writes and expects."""
