"""Citus rules from its recursive and pushdown planning and its INSERT checks.

Kept apart from :mod:`.citus` (the router planner's rules) for size: statements across
shards, ``ON CONFLICT DO UPDATE`` of an INSERT and the CTEs Citus materialises.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .citus import _SUBQUERY, _blank_subqueries, _equality_filter, _modifications, _mutable
from .lexer import _DO_UPDATE_SET, _INSERT, _parenthesised, _scope, _Table, normalize

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
