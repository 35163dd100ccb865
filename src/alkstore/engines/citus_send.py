"""The plain send of sharded Citus as a call of a coordinator function.

The postgres engine's send is ``INSERT INTO job ... SELECT ... FROM unnest(...) JOIN queue``,
wrapped with its ``pg_notify`` in a CTE. On sharded Citus that INSERT ... SELECT is pulled
to the coordinator ("INSERT/SELECT method: pull to coordinator") and, as a modifying CTE,
planned on its own with its rows kept as intermediate results: 7.1 ms a one-job send, where
an ``INSERT ... VALUES`` of the queue's shard is a fast-path router query (``Task Count:
1``). Citus refuses a sub-SELECT in an ``INSERT ... VALUES``, and a ``pg_notify`` in a
statement routed to one shard is sent on the worker, out of reach of the coordinator's
listeners.

:func:`send_function` is a PL/pgSQL function that is NOT distributed, so it runs on the
coordinator, in the sending transaction: it reads the queue row (a reference table, held by
the coordinator too), inserts each job with one ``INSERT ... VALUES`` routed to the queue's
shard, options resolved job > queue > default as the statement resolves them, then
notifies on the coordinator. One statement, one round trip. Each job is a router INSERT of
its own, so the call serves sends of up to :data:`ROUTED_JOBS` jobs; larger ones keep the
single INSERT ... SELECT, whose cost hardly grows with the batch (docs/engines.md, "Citus").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.options import NewJob
from .postgres.send import SEND_OPTION_SQL, SEND_TYPES, send_arrays

SEND_FUNCTION = "send_jobs"
"""The function's name in the job schema."""

ROUTED_JOBS = 8
"""The most jobs a send hands to the function. Measured on a real cluster (docs/engines.md,
"Citus"): the function's one INSERT a job costs about 0.4 ms each, the INSERT ... SELECT
about 4.6 ms plus 0.08 ms a job; the two cost the same at about 10 jobs."""

_ARRAYS = ("id", "data", *SEND_OPTION_SQL, "start_at", "delay", "trace_context")
"""The function's array arguments after the queue and the channel, in order."""


def _argument(name: str) -> str:
    return f"a_{name}"


def send_function(s: str) -> str:
    """``CREATE OR REPLACE FUNCTION`` of the plain send in schema ``s``:
    ``send_jobs(queue_name, ch, a_id, a_data, a_<option>..., a_start_at, a_delay,
    a_trace_context)`` inserts job ``k`` of the arrays into the ``standard`` queue
    ``queue_name`` (an option array left NULL, or a NULL element, takes the queue's value or
    the default) and notifies channel ``ch``; it returns how many jobs it inserted: all of
    them, or 0 (nothing written, no notification) when the queue is missing or not
    ``standard`` (the caller then reads the queue row, as after the statement).

    Custom plans at each call (``force_custom_plan``) as for the claim function
    (:func:`alkstore.engines.citus_calls.claim_function`): where a shard is local to the
    node running the function, a kept generic plan would grow the backend at each call."""
    arguments = ", ".join(f"{_argument(name)} {SEND_TYPES[name]}[]" for name in _ARRAYS)
    options = ", ".join(
        f"coalesce({_argument(name)}[k], {default})"
        for name, (_type, default) in SEND_OPTION_SQL.items()
    )
    retention = f"coalesce({_argument('retention_seconds')}[k], q.retention_seconds)"
    return f"""CREATE OR REPLACE FUNCTION {s}.{SEND_FUNCTION}(
        queue_name text, ch text, {arguments})
    RETURNS bigint LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS $fn$
    DECLARE
      q {s}.queue%ROWTYPE;
      starts timestamptz;
    BEGIN
      SELECT * INTO q FROM {s}.queue WHERE name = queue_name AND policy = 'standard';
      IF NOT FOUND THEN
        RETURN 0;
      END IF;
      FOR k IN 1 .. cardinality(a_id) LOOP
        starts := coalesce(a_start_at[k], now() + coalesce(a_delay[k], 0) * interval '1 second');
        INSERT INTO {s}.job (id, name, data, {", ".join(SEND_OPTION_SQL)}, policy,
            trace_context, start_after, keep_until)
          VALUES (a_id[k], queue_name, a_data[k]::jsonb, {options}, q.policy,
            a_trace_context[k]::jsonb, starts, starts + {retention} * interval '1 second');
      END LOOP;
      PERFORM pg_notify(ch, queue_name);
      RETURN cardinality(a_id);
    END
    $fn$"""


def send_call(s: str) -> str:
    """The call of :func:`send_function` in schema ``s``, its count named ``changed`` as
    the plain send's statement names it; :func:`send_params` are its parameters."""
    arrays = ", ".join(f"${i + 3}::{SEND_TYPES[name]}[]" for i, name in enumerate(_ARRAYS))
    return f"SELECT {s}.{SEND_FUNCTION}($1::text, $2::text, {arrays}) AS changed"


def send_params(queue: str, jobs: Sequence[NewJob], channel: str) -> tuple[Any, ...]:
    """The parameters of :func:`send_call`: an array only where some job sets it
    (:func:`~alkstore.engines.postgres.send.send_arrays`), else NULL: every job takes the
    queue's value or the default."""
    arrays = send_arrays(jobs)
    return (queue, channel, *(arrays.get(name) for name in _ARRAYS))
