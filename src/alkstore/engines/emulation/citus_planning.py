"""Citus rules from its recursive and pushdown planning and its INSERT checks.

Kept apart from :mod:`.citus` (the router planner's rules) for size: statements across
shards, ``ON CONFLICT DO UPDATE`` of an INSERT and the CTEs Citus materialises.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .citus import (
    _SUBQUERY,
    _blank_subqueries,
    _equality_filter,
    _modifications,
    _mutable,
    _unfiltered_read,
)
from .lexer import (
    _DO_UPDATE_SET,
    _INSERT,
    _NAME,
    _STMT,
    _parenthesised,
    _scope,
    _Table,
    normalize,
)

_FROM_WORD = re.compile(r"\bFROM\b", re.I)


def _mutable_subquery_across_shards(table: str, column: str) -> Callable[[str], str | None]:
    """A sub-SELECT without FROM that holds a non-IMMUTABLE function, in an UPDATE or DELETE
    of ``table`` that no ``column = $n`` routes to one shard (a query routed to one shard
    goes to its worker whole; one across shards is planned for pushdown, which refuses it)."""
    filters = _equality_filter(column)

    def check(sql: str) -> str | None:
        for what, clauses in _modifications(normalize(sql), frozenset({table})):
            if filters.search(clauses.get("WHERE", "")):
                continue
            for clause in ("SET", "WHERE"):
                text = clauses.get(clause, "")
                for m in _SUBQUERY.finditer(text):
                    inner = _parenthesised(text, m.start())
                    top = _blank_subqueries(inner[inner.upper().index("SELECT") + 6 :])
                    if _FROM_WORD.search(top):
                        continue
                    found = _mutable(inner)
                    if found:
                        return f"{found} in a sub-SELECT without FROM in an {what} across shards"
        return None

    return check


_WITH_RECURSIVE = re.compile(r"^\s*WITH\s+RECURSIVE\b", re.I)


def _recursive_cte_across_shards(table: str, column: str) -> Callable[[str], str | None]:
    """A ``WITH RECURSIVE`` statement whose UPDATE or DELETE of ``table`` no ``column = $n``
    routes to one shard: Citus then plans its CTEs recursively, which refuses a recursive CTE
    (a query routed to one shard goes to its worker whole, recursive CTE included)."""
    filters = _equality_filter(column)

    def check(sql: str) -> str | None:
        norm = normalize(sql)
        if not _WITH_RECURSIVE.match(norm):
            return None
        for what, clauses in _modifications(norm, frozenset({table})):
            if not filters.search(clauses.get("WHERE", "")):
                return f"a recursive CTE in an {what} of {table!r} across shards"
        return None

    return check


def _mutable_in_do_update(tables: frozenset[str]) -> Callable[[str], str | None]:
    """A non-IMMUTABLE function in the ``DO UPDATE SET`` (or its ``WHERE``) of an INSERT into
    one of ``tables``."""

    def check(sql: str) -> str | None:
        norm = normalize(sql)
        for m in _DO_UPDATE_SET.finditer(norm):
            inserts = list(_INSERT.finditer(norm, 0, m.start()))
            if not inserts or _Table.parse(inserts[-1].group(1)).name not in tables:
                continue
            _, end = _scope(norm, m.end())
            found = _mutable(norm[m.end() : end])
            if found:
                table = _Table.parse(inserts[-1].group(1)).name
                return f'{found} in the DO UPDATE SET clause of an INSERT into "{table}"'
        return None

    return check


_NOTIFY_CALL = re.compile(r"\bpg_notify\s*\(", re.I)
_CONSUMED_AFTER = re.compile(r"\s*(?:AS\s+\w+\s*)?(?:,|\)|FROM\b|$)", re.I)


def _void_cte_column(tables: frozenset[str]) -> Callable[[str], str | None]:
    """A select-list item ``pg_notify(…)`` (type ``void``) inside a WITH statement that touches
    one of ``tables``: Citus materialises the CTEs of such a statement into intermediate
    results, and a column of a pseudo-type cannot be stored."""
    names = "|".join(re.escape(t) for t in sorted(tables))
    touches = re.compile(rf"(?:^|[\s.\"])(?:{names})\b", re.I)

    def check(sql: str) -> str | None:
        norm = normalize(sql)
        if not re.match(r"\s*WITH\b", norm, re.I) or not touches.search(norm):
            return None
        for m in _NOTIFY_CALL.finditer(norm):
            close = m.end() + len(_parenthesised(norm, m.end() - 1)) + 1
            if _CONSUMED_AFTER.match(norm, close):
                return "pg_notify(…) as a column (pseudo-type void) of a CTE"
        return None

    return check


def _spread_from_one_shard(
    table: str, column: str, reference: frozenset[str], feature: frozenset[str]
) -> Callable[[str], str | None]:
    """A statement routed to one shard of ``table`` (an UPDATE or DELETE of it beside a
    ``column = $n`` filter) that also updates ``table`` without that filter in the UPDATE's
    own WHERE, reads it in a sub-SELECT without that filter at the sub-SELECT's own level, or
    writes one of the ``reference`` tables; a statement that writes a ``feature`` table is
    that feature's own and let through.

    Calibrated on a real Citus 13.2.2 cluster (coordinator + 2 workers, 32 shards), by
    ``EXPLAIN EXECUTE`` of each prepared statement of the hot path:

    - accepted, ``Task Count: 1``: the completion of a queue's targets with its
      ``flow_parents`` read (``UPDATE job … WHERE j.name = $1``, all CTEs of queue ``$1``),
      ``complete_and_fetch`` (one statement: completion, pick ``FOR UPDATE SKIP LOCKED`` and
      the claim's UPDATE ``WHERE j.name = $1 AND j.name = next.name AND j.id = next.id``),
      the plain fetch, ``touch`` and the worker's ``watch``;
    - rejected, more than one task: the claim whose UPDATE re-found the picked rows by
      ``j.name = next.name AND j.id = next.id`` only (a distributed subplan, then ``Task
      Count: 32``), and the completion that released flow jobs in the same statement
      (``UPDATE job_blocked`` and the release ``UPDATE job … FROM flow_ready``: ``Task Count:
      4`` over the job shards, and an ``ExclusiveLock`` through ``lock_shard_resources`` on
      the reference table's shard on every node, which serialised every completion of the
      cluster: 6 jobs/s at 8 consumers);
    - rejected: ``fail`` whose retry and failed UPDATEs (each ``WHERE j.name = $1``) test a
      stately queue's retry slot with ``EXISTS (SELECT 1 FROM job o WHERE o.name = j.name
      …)``: each UPDATE a distributed subplan, ``Task Count: 32`` and ``32``; accepted with
      ``o.name = $1`` in that sub-SELECT: ``Task Count: 1`` for every part of the statement;
      ``snooze``'s UPDATE with the same kind of sub-SELECT: 32 tasks, with ``o.name = $1``: 1;
      ``resume`` and ``retry`` (their policy check reads the key's other jobs so): a subplan
      of 32 tasks and three of 1, with ``o.name = $1``: one task in all.
    - accepted, one task: the call of the claim function (``SELECT … FROM claim_next($1, …)``,
      :mod:`alkstore.engines.citus_calls`): ``Task Count: 1``, a ``Function Scan on
      claim_next`` on the worker holding the queue's shard (DEBUG: "pushing down the function
      call"); its ``CREATE FUNCTION`` is checked as one text, each statement of the body with
      ``j.name = $1`` (the queue argument) and one table; the call of a queue's own copy of
      it (``SELECT … FROM claim_<md5 of the name>($1, …)``, prepared with parameters, made by
      ``claim_function_for`` from that checked body with the queue's name written in where it
      reads ``name = $1``): ``Task Count: 1``, ``Function Scan on claim_ff33…`` on the worker
      holding the shard, and on that worker (DEBUG2) "Local executor: Using task's cached
      local plan" from the sixth call on; expiry of a queue (``j.name = $1``
      per queue): ``Task Count: 1`` for every part, where the names bound as an array ran its
      UPDATEs on all 32 shards (its find reads every shard: maintenance across queues);
    - accepted, one task: the plain send of up to 8 jobs, a call of the coordinator function
      ``send_jobs`` (:mod:`alkstore.engines.citus_send`; not distributed, so ``EXPLAIN`` of
      the call is a ``Result`` on the coordinator and its ``pg_notify`` reaches the
      coordinator's listeners: 3 of 3 notifications arrived). Its ``INSERT … VALUES`` of one
      job, prepared with parameters as PL/pgSQL runs it: ``Task Count: 1``, ``Insert on
      job_121036`` on the worker holding the queue's shard, the generic plan (sixth
      execution) too; another queue: one task on the other worker. Called with two jobs
      under DEBUG2 and ``citus.log_remote_commands``: "Creating router plan" for each INSERT,
      the queue row read on the coordinator ("executing the command locally"), and BEGIN,
      the two INSERTs and COMMIT sent to that one worker only. The statement it replaces for
      those sends, ``WITH changed AS (INSERT INTO job … SELECT … FROM unnest(…) JOIN queue
      q ON q.name = $1 …), note AS (SELECT pg_notify(…) …) SELECT count(*) …``: the INSERT
      "INSERT/SELECT method: pull to coordinator" as a distributed subplan whose rows the
      top query reads back through ``read_intermediate_result`` (7-11 ms a one-job send
      against 2.3-3.5 ms for the call); it stays for sends of more jobs and for the guarded
      send (a policy or a throttle), where it is one statement whatever the batch.
    """
    filters = _equality_filter(column)
    writes = re.compile(
        rf"{_STMT}(?:INSERT\s+INTO|UPDATE\s+(?:ONLY\s+)?|DELETE\s+FROM\s+(?:ONLY\s+)?)({_NAME})",
        re.I,
    )

    def check(sql: str) -> str | None:
        norm = normalize(sql)
        changes = _modifications(norm, frozenset({table}))
        if not changes or not filters.search(norm):
            return None
        written = {_Table.parse(m.group(1)).name for m in writes.finditer(norm)}
        if written & feature:
            return None
        for what, clauses in changes:
            # A DELETE moves jobs (redrive: from one queue to another), never on the hot path.
            if what.startswith("UPDATE") and not filters.search(clauses.get("WHERE", "")):
                return f'{what} without "{column} = $n" in a statement routed to one shard'
        for m in _SUBQUERY.finditer(norm):
            if _unfiltered_read(_blank_subqueries(_parenthesised(norm, m.start())), table, filters):
                return (
                    f'a sub-SELECT of "{table}" without "{column} = $n" in a statement routed '
                    "to one shard"
                )
        for name in sorted(written & reference):
            return f'a write of reference table "{name}" in a statement routed to one shard'
        return None

    return check


def _notify_from_one_shard(table: str, column: str) -> Callable[[str], str | None]:
    """``pg_notify(…)`` in a statement whose UPDATE or DELETE of ``table`` is routed to one
    shard by a ``column = $n`` filter: Citus sends such a statement whole to the worker
    holding the shard, where the notification is sent to no listener of the coordinator (an
    INSERT … SELECT runs through the coordinator, and its notification arrives)."""
    filters = _equality_filter(column)

    def check(sql: str) -> str | None:
        norm = normalize(sql)
        if not _NOTIFY_CALL.search(norm):
            return None
        for what, clauses in _modifications(norm, frozenset({table})):
            if filters.search(clauses.get("WHERE", "")):
                return f"pg_notify(…) in a statement whose {what} is routed to one shard"
        return None

    return check
