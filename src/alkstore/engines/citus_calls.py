"""The hot path of sharded Citus as one function call the coordinator delegates.

Sent to the coordinator as a statement, ``complete_and_fetch`` of one job was planned there
on every call (a router plan of CTEs cannot be kept as a generic plan: "could not create
distributed plan"), deparsed for the worker and planned again there: 1,483 µs of coordinator
CPU a job against 437 on stock PostgreSQL (docs/benchmarks.md, "Citus"). Here the same work is
:func:`claim_function`, a PL/pgSQL function distributed by its queue argument and co-located
with the job table (``create_distributed_function``): the coordinator forwards
``SELECT ... FROM claim_next($1, ...)`` to the worker holding the queue's shard in one round
trip ("pushing down the function call"), and there each statement of the body is a fast-path
router query of one table (``j.name = $1``: the function's queue argument) run locally.

Each queue has a copy of the function of its own (:func:`queue_claim_maker`), its body the
same text with the queue's name written in where the generic one reads ``$1``: with the
distribution key a constant, Citus plans each statement's shard query once and keeps it with
the function's generic plan, where with the key a parameter it deparses, parses and plans the
shard query again at every execution (about 40 % of the worker's CPU per job,
docs/benchmarks.md, "Citus"). The generic function still serves ``complete`` and is the
copies' template.

Delegation happens for a call outside a transaction block (Citus's condition without
``force_delegation``); inside one, or on stock PostgreSQL behind the emulation guard, the same
function runs where it is called, with the same effect.
"""

from __future__ import annotations

import hashlib

from ..core.identifiers import quote_ident
from ..core.plans import Statement
from ..core.states import Operation
from .postgres.policies import PLAIN_QUEUE
from .postgres.sql import (
    RETURNED_JOB_COLUMNS,
    accepted,
    counted_job_columns,
    job_column_types,
    seconds_after,
    targeted_state,
)

CLAIM_FUNCTION = "claim_next"
"""The function's name in the job schema."""

CLAIM_SIGNATURE = "(text, bigint, uuid[], int[], text)"
"""Its argument types: queue, claim limit, target ids, their retry counts, output JSON."""

QUEUE_CLAIM_MAKER = "claim_function_for"
"""The function creating a queue's own claim function (:func:`queue_claim_maker`)."""

COUNTS = ("completed", "flow_parents", "picked")
"""The counts heading every row the function returns, as the statements they replace return
them: jobs completed, targets left alone because flow jobs wait for them, jobs claimed."""

_RETURNED_TABLE = f"TABLE ({counted_job_columns(COUNTS)})"


def claim_function(s: str) -> str:
    """``CREATE OR REPLACE FUNCTION`` of the claim in schema ``s``: complete the targets ``ids``
    (fenced by ``rcs``, output ``out_json``) and claim up to ``lim`` jobs of queue ``q``.

    Each row is the three :data:`COUNTS` and a claimed job (:data:`JOB_COLUMNS`), or, when
    nothing is claimed, one row of counts and NULLs. Targets that flow jobs wait for are not
    completed (``flow_parents`` counts them) and then nothing is claimed: the caller completes
    them with the release of their flow jobs and claims after that, as with the statement.
    The others are completed in this call's transaction.

    Every statement filters ``j.name = $1`` and reads one table (the fence is one ``id:count``
    key per target instead of a join to the target list), which Citus plans on its fast path.

    ``now()`` is read once into ``t``: in a queue's own copy (:func:`queue_claim_maker`) a
    STABLE call in an UPDATE makes Citus rebuild the shard query as text at each execution,
    where a variable is a parameter of the kept plan.

    The function plans its statements afresh at each call (``plan_cache_mode =
    force_custom_plan``). Run locally on the worker with a generic plan kept across calls,
    Citus 13.2 re-plans the shard query at every execution anyway and keeps each plan in the
    generic plan's memory (its local plan cache misses a plan whose shard is pruned at
    execution: https://github.com/citusdata/citus/pull/8824): the worker's backend grew by
    about 160 kB per claim, 1.2 GB in 20 s of one client. Custom plans are freed after each
    call, for about 7 % more of the worker's CPU per call (docs/benchmarks.md, "Citus").
    """
    nulls = ", ".join(f"NULL::{kind}" for _name, kind in job_column_types())
    completable = targeted_state(Operation.COMPLETE)
    fence = "(j.id = ANY(unfenced) OR (j.id::text || ':' || j.retry_count) = ANY(fenced))"
    heartbeat = seconds_after("t", "0 * j.heartbeat_seconds")
    queued = accepted(Operation.FETCH)
    return f"""CREATE OR REPLACE FUNCTION {s}.{CLAIM_FUNCTION}(
        q text, lim bigint, ids uuid[], rcs int[], out_json text)
    RETURNS {_RETURNED_TABLE}
    LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $fn$
    #variable_conflict use_column
    DECLARE
      t timestamptz := now();
      n_done bigint := 0;
      n_parents bigint := 0;
      fenced text[] := '{{}}';
      unfenced uuid[] := '{{}}';
      chosen uuid[] := '{{}}';
      v uuid;
    BEGIN
      IF cardinality(ids) > 0 THEN
        FOR k IN 1 .. cardinality(ids) LOOP
          IF rcs[k] IS NULL THEN
            unfenced := unfenced || ids[k];
          ELSE
            fenced := fenced || (ids[k]::text || ':' || rcs[k]);
          END IF;
        END LOOP;
        UPDATE {s}.job j SET state = 'completed', completed_on = t,
            output = out_json::jsonb
          WHERE j.name = $1 AND j.id = ANY(ids) AND {completable}
            AND j.flow_parent IS NOT TRUE AND {fence};
        GET DIAGNOSTICS n_done = ROW_COUNT;
        IF n_done < cardinality(ids) THEN
          SELECT count(*) INTO n_parents FROM {s}.job j
            WHERE j.name = $1 AND j.id = ANY(ids) AND {completable} AND j.flow_parent
              AND {fence};
        END IF;
      END IF;
      IF n_parents = 0 AND lim > 0 THEN
        PERFORM FROM {s}.queue pq WHERE pq.name = $1 AND {PLAIN_QUEUE};
        IF FOUND THEN
          FOR v IN SELECT j.id FROM {s}.job j
              WHERE j.name = $1 AND j.state IN {queued} AND j.start_after <= t
              ORDER BY j.priority DESC, j.created_on, j.id LIMIT lim FOR UPDATE SKIP LOCKED
          LOOP
            chosen := chosen || v;
          END LOOP;
        END IF;
      END IF;
      IF cardinality(chosen) = 0 THEN
        RETURN QUERY SELECT n_done, n_parents, 0::bigint, {nulls};
        RETURN;
      END IF;
      RETURN QUERY UPDATE {s}.job j SET state = 'active', started_on = t,
          heartbeat_on = {heartbeat},
          retry_count = CASE WHEN j.started_on IS NULL THEN j.retry_count
                             ELSE j.retry_count + 1 END
        WHERE j.name = $1 AND j.id = ANY(chosen)
        RETURNING n_done, n_parents, cardinality(chosen)::bigint, {RETURNED_JOB_COLUMNS};
    END
    $fn$"""


def install(s: str, *, distribute: bool) -> list[Statement]:
    """The statements creating the claim function in schema ``s`` and, with ``distribute``
    (a real cluster, its job table distributed), distributing it by the queue argument,
    co-located with the job table."""
    statements = [Statement(claim_function(s))]
    if distribute:
        statements.append(
            Statement(
                "SELECT create_distributed_function($1::text::regprocedure, 'q', "
                "colocate_with := $2::text)",
                (f"{s}.{CLAIM_FUNCTION}{CLAIM_SIGNATURE}", f"{s}.job"),
            )
        )
    return statements


def queue_claim_name(queue: str) -> str:
    """The name of ``queue``'s own claim function: ``claim_`` and the MD5 of the name's
    UTF-8 bytes, as the server's ``md5(text)`` computes it in a UTF-8 database."""
    return "claim_" + hashlib.md5(queue.encode(), usedforsecurity=False).hexdigest()


def queue_claim_maker(s: str) -> str:
    """``CREATE OR REPLACE FUNCTION`` of ``claim_function_for(q, generic)`` in schema ``s``:
    creates (or replaces) queue ``q``'s own claim function, :func:`queue_claim_name`, from the
    body of the ``generic`` one with the queue's name, quoted by the server, where it reads
    ``name = $1``; returns the new function's signature.

    The copy keeps generic plans (``force_generic_plan``): with the distribution key a
    constant, Citus 13.2 plans a fast-path statement's shard query once, at planning, and the
    kept plan's task reuses it ("Local executor: Using task's cached local plan"), without
    the per-execution re-plan and the memory growth of the parameter key (see
    :func:`claim_function`). Measured on a real cluster: 35-40 % less worker CPU per
    one-job ``complete_and_fetch``, the backend's memory flat over 3,700 calls
    (docs/benchmarks.md, "Citus")."""
    create = (
        "CREATE OR REPLACE FUNCTION %s.%I(q text, lim bigint, ids uuid[], rcs int[], "
        f"out_json text) RETURNS {_RETURNED_TABLE} LANGUAGE plpgsql "
        "SET plan_cache_mode = force_generic_plan AS %L"
    )
    return f"""CREATE OR REPLACE FUNCTION {s}.{QUEUE_CLAIM_MAKER}(q text, generic regprocedure)
    RETURNS text LANGUAGE plpgsql AS $mk$
    DECLARE
      body text;
      nsp text;
      fn text := 'claim_' || md5(q);
    BEGIN
      SELECT p.prosrc, p.pronamespace::regnamespace::text INTO STRICT body, nsp
        FROM pg_proc p WHERE p.oid = generic;
      body := replace(body, 'name = $1 ', 'name = ' || quote_literal(q) || ' ');
      IF position('$1' IN body) > 0 THEN
        RAISE EXCEPTION 'the claim body still reads $1 after naming queue %', q;
      END IF;
      EXECUTE format($create${create}$create$, nsp, fn, body);
      RETURN format('%s.%I{CLAIM_SIGNATURE}', nsp, fn);
    END
    $mk$"""


def queue_claim(s: str, queue_sql: str, first: int, *, distribute: bool) -> str:
    """SQL creating the claim function of each queue ``queue_sql`` names (an expression of
    one row's queue name) and with ``distribute`` distributing it beside the job table, one
    text per queue; :func:`queue_claim_params` bound from ``$first``."""
    made = f"{s}.{QUEUE_CLAIM_MAKER}({queue_sql}, ${first}::text::regprocedure)"
    if not distribute:
        return made
    return (
        f"create_distributed_function({made}::regprocedure, 'q', "
        f"colocate_with := ${first + 1}::text)::text"
    )


def queue_claim_params(s: str, *, distribute: bool) -> tuple[str, ...]:
    """The parameters of :func:`queue_claim`: the generic function, and with ``distribute``
    the job table."""
    generic = f"{s}.{CLAIM_FUNCTION}{CLAIM_SIGNATURE}"
    return (generic, f"{s}.job") if distribute else (generic,)


def install_queue_claims(s: str, *, distribute: bool, existing: bool) -> list[Statement]:
    """The statements giving schema ``s`` the per-queue claim functions: the generic one
    re-created (its body is their template), the maker, and with ``existing`` (an upgrade) a
    function for each queue already there.

    The queues are read into an array first: a SELECT of the reference table with the
    function in its target list would be sent whole to a worker."""
    statements = [Statement(claim_function(s)), Statement(queue_claim_maker(s))]
    if existing:
        made = queue_claim(s, "n", 1, distribute=distribute)
        statements.append(
            Statement(
                f"SELECT count({made}) AS n FROM unnest(ARRAY(SELECT name FROM {s}.queue)) n",
                queue_claim_params(s, distribute=distribute),
            )
        )
    return statements


def claim_call(s: str, returned: str, args: str, queue: str | None = None) -> str:
    """The call of the claim in schema ``s`` with ``args`` (SQL of the five arguments),
    returning the counts and the columns ``returned`` (names of :data:`JOB_COLUMNS`): of
    ``queue``'s own function, else of the generic one.

    One function in FROM and nothing else, no WHERE: the form Citus delegates."""
    function = CLAIM_FUNCTION if queue is None else quote_ident(queue_claim_name(queue))
    return f"SELECT {', '.join(COUNTS)}, {returned} FROM {s}.{function}({args})"
