"""Rules for Citus with one distributed table: what its planner refuses.

Each rule cites the Citus source that raises the error; the profile is built for one
distributed table and its distribution column (alkstore: ``job`` by queue ``name``) plus the
reference tables (``queue``). The function rules mirror
``TargetlistAndFunctionsSupported`` and ``MasterIrreducibleExpression`` in
``multi_router_planner.c``: in an UPDATE or DELETE of a Citus table, volatile functions are
refused anywhere, STABLE functions (and STABLE operators such as ``timestamptz + interval``)
may not take a column, and CASE/COALESCE may hold only IMMUTABLE functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .lexer import (
    _ALIAS,
    _ALTER_TABLE,
    _DO_UPDATE_SET,
    _ID,
    _INSERT,
    _NAME,
    _UPDATE,
    _column_list,
    _ident,
    _parenthesised,
    _scope,
    _set_columns,
    _split_top,
    _Table,
    normalize,
)
from .rules import _NOT_COLUMNS, _ROW_LOCK

_ROW_LOCK_ANY = re.compile(rf"{_ROW_LOCK}(?:[^();]*?\bSKIP\s+LOCKED\b)?|\bSKIP\s+LOCKED\b", re.I)
_TABLE_REF = re.compile(rf"(?:\bFROM|\bJOIN|,|\bUSING)\s+(?:ONLY\s+)?({_NAME}){_ALIAS}", re.I)
_PARAM = r"\$\d+(?:\s*::\s*\w+)?(?![\w\[:])"


def _equality_filter(column: str) -> re.Pattern[str]:
    """``column = $n`` (either side, optionally qualified: group 1 or 2 is the qualifier):
    the filter that routes a query to one shard."""
    col = re.escape(column)
    return re.compile(
        rf"({_ID})\s*\.\s*\"?{col}\"?\s*=\s*{_PARAM}"
        rf"|(?<![\w.$])\"?{col}\"?\s*=\s*{_PARAM}"
        rf"|{_PARAM}\s*=\s*({_ID})\s*\.\s*\"?{col}\b"
        rf"|{_PARAM}\s*=\s*\"?{col}\b",
        re.I,
    )


def _unfiltered_read(scope: str, table: str, filters: re.Pattern[str]) -> bool:
    """Does ``scope`` (one query level) read ``table`` without a ``filters`` match on it
    (unqualified, or qualified by one of the table's aliases)?"""
    aliases = {
        _ident(ref.group(2)) if ref.group(2) else table
        for ref in _TABLE_REF.finditer(scope)
        if _Table.parse(ref.group(1)).name == table
    }
    if not aliases:
        return False
    for f in filters.finditer(scope):
        qualifier = f.group(1) or f.group(2)
        if qualifier is None or _ident(qualifier) in aliases:
            return False
    return True


def _row_lock_filter(table: str, column: str) -> Callable[[str], str | None]:
    filters = _equality_filter(column)

    def check(sql: str) -> str | None:
        norm = normalize(sql)
        if re.match(r"(?:CREATE|ALTER)\s+POLICY\b", norm, re.I):
            return None
        for m in _ROW_LOCK_ANY.finditer(norm):
            start, end = _scope(norm, m.start())
            if _unfiltered_read(norm[start:end], table, filters):
                return (
                    f'{m.group(0)} on table "{table}" without an equality filter on its '
                    f'distribution column "{column}"'
                )
        return None

    return check


def _distribution_update(table: str, column: str) -> Callable[[str], str | None]:
    def check(sql: str) -> str | None:
        norm = normalize(sql)
        for m in _UPDATE.finditer(norm):
            if _Table.parse(m.group(1)).name == table and column in _set_columns(norm, m.end()):
                return f'UPDATE of distribution column "{column}" of table "{table}"'
        for m in _DO_UPDATE_SET.finditer(norm):
            inserts = list(_INSERT.finditer(norm, 0, m.start()))
            if (
                inserts
                and _Table.parse(inserts[-1].group(1)).name == table
                and column in _set_columns(norm, m.end())
            ):
                return f'ON CONFLICT DO UPDATE of distribution column "{column}" of "{table}"'
        return None

    return check


_KEY = re.compile(
    rf"(?:CONSTRAINT\s+{_ID}\s+)?(PRIMARY\s+KEY|UNIQUE)(?:\s+NULLS\s+(?:NOT\s+)?DISTINCT)?\s*\(",
    re.I,
)
_COLUMN_DEF = re.compile(rf"(?:ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?)?({_ID})\s", re.I)
_INLINE_KEY = re.compile(r"\b(PRIMARY\s+KEY|UNIQUE)\b", re.I)
_CREATE_TABLE = re.compile(
    rf"\bCREATE\s+(?:(?:GLOBAL\s+|LOCAL\s+)?(?:TEMP|TEMPORARY|UNLOGGED)\s+)?TABLE\s+"
    rf"(?:IF\s+NOT\s+EXISTS\s+)?({_NAME})\s*\(",
    re.I,
)
_UNIQUE_INDEX = re.compile(
    rf"\bCREATE\s+UNIQUE\s+INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?"
    rf"(?:{_NAME}\s+)?ON\s+(?:ONLY\s+)?({_NAME})\s*(?:USING\s+\w+\s*)?\(",
    re.I,
)


def _key_without_column(table: str, column: str) -> Callable[[str], str | None]:
    def keys(items: list[str]) -> str | None:
        """The first key among table elements (or ALTER TABLE actions) that lacks ``column``."""
        for item in items:
            m = _KEY.match(item)
            if m:
                columns = _column_list(_parenthesised(item, m.end() - 1))
                if column not in columns:
                    return f"{' '.join(m.group(1).upper().split())} ({', '.join(columns)})"
                continue
            definition = _COLUMN_DEF.match(item + " ")
            if definition is None:
                continue
            name = _ident(definition.group(1))
            inline = _INLINE_KEY.search(item, definition.end())
            if inline and name not in _NOT_COLUMNS | {"like"} and name != column:
                return f"{' '.join(inline.group(1).upper().split())} on column {name!r}"
        return None

    def check(sql: str) -> str | None:
        norm = normalize(sql)
        found: str | None = None
        for m in _CREATE_TABLE.finditer(norm):
            if _Table.parse(m.group(1)).name == table:
                found = found or keys(_split_top(_parenthesised(norm, m.end() - 1)))
        for m in _UNIQUE_INDEX.finditer(norm):
            if _Table.parse(m.group(1)).name == table:
                columns = _column_list(_parenthesised(norm, m.end() - 1))
                if column not in columns:
                    found = found or f"UNIQUE INDEX ({', '.join(columns)})"
        for m in _ALTER_TABLE.finditer(norm):
            if _Table.parse(m.group(1)).name == table:
                actions = [
                    re.sub(r"^ADD\s+(?=CONSTRAINT\b|PRIMARY\b|UNIQUE\b)", "", a, flags=re.I)
                    for a in _split_top(m.group(2))
                    if re.match(r"ADD\b|CONSTRAINT\b|PRIMARY\b|UNIQUE\b", a, re.I)
                ]
                found = found or keys(actions)
        if found is None:
            return None
        return f'{found} on table "{table}" lacks its distribution column "{column}"'

    return check


# --- functions in modifications of Citus tables ------------------------------------------------

_VOLATILE = re.compile(
    r"\b(random|random_normal|clock_timestamp|timeofday|gen_random_uuid|uuid_generate_v\w+"
    r"|uuidv[47]|nextval|setval|setseed|pg_sleep\w*)\s*\(",
    re.I,
)
"""Volatile built-ins (``provolatile = 'v'``)."""
_STABLE = re.compile(
    r"\b(now|statement_timestamp|transaction_timestamp|current_setting|to_char|to_date"
    r"|date_trunc|date_part|extract|age|make_timestamptz"
    r"|jsonb?_build_object|jsonb?_build_array|to_jsonb?|row_to_json)\s*\(",
    re.I,
)
"""STABLE built-ins: time zone or setting dependent, and the JSON builders that take "any"
(a real cluster refused ``jsonb_build_object`` inside CASE in an UPDATE). ``timezone(zone,
ts)`` is not one: it is IMMUTABLE for ``timestamp`` and ``timestamptz`` (only its ``timetz``
form, which alkstore never uses, is STABLE)."""
_TIMEZONE_CALL = re.compile(r"\btimezone\s*$", re.I)
_SQL_VALUE = re.compile(
    r"\b(current_timestamp|current_date|current_time|localtimestamp|localtime"
    r"|current_user|session_user|current_role|current_schema|current_catalog)\b(?!\s*\()",
    re.I,
)
"""SQL value functions (``SQLValueFunction``): all STABLE."""
_INTERVAL = re.compile(r"\binterval\s*''|::\s*interval\b|\bmake_interval\s*\(", re.I)
_ADDITIVE = re.compile(r"(?<![-+*/<>=!~|&^#@])[+-](?![-+>])")
_SEGMENT_BREAK = re.compile(
    r"<>|!=|<=|>=|[<>=,]|\b(?:AND|OR|NOT|IS|IN|CASE|WHEN|THEN|ELSE|END|BETWEEN|LIKE|ILIKE)\b",
    re.I,
)
_WORD = re.compile(rf"(::\s*)?({_ID}(?:\s*\.\s*{_ID})*)(\s*\(|\s*'')?")
_NOT_COLUMN_WORDS = frozenset(
    [
        "null",
        "true",
        "false",
        "and",
        "or",
        "not",
        "is",
        "in",
        "case",
        "when",
        "then",
        "else",
        "end",
        "distinct",
        "from",
        "as",
        "array",
        "any",
        "all",
        "some",
        "between",
        "like",
        "ilike",
        "similar",
        "exists",
        "select",
        "interval",
        "timestamp",
        "timestamptz",
        "date",
        "time",
        "with",
        "without",
        "zone",
        "at",
        "double",
        "precision",
        "epoch",
        "year",
        "month",
        "day",
        "hour",
        "minute",
        "second",
        "millisecond",
        "microsecond",
        "dow",
        "doy",
        "week",
        "quarter",
        "isodow",
        "isoyear",
    ]
)
_CLAUSE = re.compile(r"\b(SET|FROM|USING|WHERE|RETURNING)\b", re.I)
_MODIFY = re.compile(
    rf"(?:^|[(;)]|\$\$)\s*(?:UPDATE\s+(?:ONLY\s+)?({_NAME}){_ALIAS}\s+SET\b"
    rf"|DELETE\s+FROM\s+(?:ONLY\s+)?({_NAME}){_ALIAS})",
    re.I,
)
_SUBQUERY = re.compile(r"\(\s*(?:SELECT|WITH|VALUES)\b", re.I)
_CASE_OR_COALESCE = re.compile(r"\b(?:CASE\b|coalesce\s*\()", re.I)
_CASE_TOKEN = re.compile(r"\b(CASE|END)\b", re.I)
_AFTER_DISTINCT = re.compile(r"\bDISTINCT\s*$", re.I)


def _blank_subqueries(text: str) -> str:
    """``text`` with every parenthesised sub-SELECT's contents blanked (same length)."""
    out = text
    for m in _SUBQUERY.finditer(text):
        inner = _parenthesised(text, m.start())
        start = m.start() + 1
        out = out[:start] + " " * len(inner) + out[start + len(inner) :]
    return out


def _opening_paren(text: str, close: int) -> int:
    """Where the parenthesis that closes at ``close`` opens (-1 when unbalanced)."""
    depth = 0
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def _without_timestamp_arithmetic(text: str) -> str:
    """``text`` without its signs (unary ``+``/``-``) and the ``+``/``-`` operators whose left
    operand is a ``timezone(zone, …)`` call: that result is a ``timestamp`` (no time zone), and
    ``timestamp ± interval`` is IMMUTABLE, unlike ``timestamptz ± interval``."""
    out = list(text)
    for m in _ADDITIVE.finditer(text):
        left = text[: m.start()].rstrip()
        if not left or left[-1] in "(,+-*/":
            out[m.start()] = " "  # a sign, not an operator between two values
            continue
        if not left.endswith(")"):
            continue
        opening = _opening_paren(left, len(left) - 1)
        if opening > 0 and _TIMEZONE_CALL.search(left[:opening]):
            out[m.start()] = " "
    return "".join(out)


def _mutable(text: str) -> str | None:
    """A non-IMMUTABLE function in ``text`` (sub-SELECTs included), as PostgreSQL's
    ``contain_mutable_functions`` would find it; ``timestamptz ± interval`` counts."""
    text = _without_timestamp_arithmetic(text)
    for pattern in (_VOLATILE, _STABLE, _SQL_VALUE):
        m = pattern.search(text)
        if m:
            return m.group(0).rstrip("( ") + ("()" if m.group(0).rstrip().endswith("(") else "")
    if _INTERVAL.search(text) and _ADDITIVE.search(text):
        return "timestamptz ± interval"
    return None


def _has_column(text: str) -> bool:
    """Whether ``text`` names a column (an identifier that is no keyword, type or function)."""
    for m in _WORD.finditer(text):
        cast, word, follower = m.groups()
        if cast or follower or word.lower() in _NOT_COLUMN_WORDS or _SQL_VALUE.fullmatch(word):
            continue
        if m.start() > 0 and text[m.start() - 1] == "$":
            continue
        return True
    return False


def _stable_with_column(text: str) -> str | None:
    """A STABLE function or operator given a column, in ``text`` (sub-SELECTs blanked)."""
    text = _without_timestamp_arithmetic(text)
    for m in _STABLE.finditer(text):
        args = _parenthesised(text, m.end() - 1)
        if _has_column(args):
            return f"{m.group(1)}({args.strip()})"
    for segment in _SEGMENT_BREAK.split(text):
        if _INTERVAL.search(segment) and _ADDITIVE.search(segment) and _has_column(segment):
            return f"{segment.strip()} (timestamptz ± interval is STABLE)"
    return None


def _case_mutable(text: str, blanked: str) -> str | None:
    """A CASE or COALESCE (outside sub-SELECTs) that holds a non-IMMUTABLE function."""
    for m in _CASE_OR_COALESCE.finditer(blanked):
        if m.group(0).upper().startswith("CASE"):
            depth, end = 0, len(text)
            for token in _CASE_TOKEN.finditer(blanked, m.start()):
                depth += 1 if token.group(1).upper() == "CASE" else -1
                if depth == 0:
                    end = token.end()
                    break
            span = text[m.start() : end]
        else:
            span = "coalesce(" + _parenthesised(text, m.end() - 1) + ")"
        found = _mutable(span)
        if found:
            kind = "CASE" if span[:4].upper() == "CASE" else "COALESCE"
            return f"{found} in {kind}"
    return None


def _clauses(norm: str, start: int, end: int) -> dict[str, str]:
    """The top-level ``SET``/``FROM``/``USING``/``WHERE``/``RETURNING`` clauses of the
    modification whose text runs from ``start`` to ``end``."""
    found: list[tuple[str, int, int]] = []
    depth = 0
    for k in range(start, end):
        ch = norm[k]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch.isalpha() and (k == 0 or not norm[k - 1].isalnum()):
            m = _CLAUSE.match(norm, k)
            if m and not (m.group(1).upper() == "FROM" and _AFTER_DISTINCT.search(norm, 0, k)):
                found.append((m.group(1).upper(), m.start(), m.end()))
    clauses: dict[str, str] = {}
    for i, (name, _, text_start) in enumerate(found):
        text_end = found[i + 1][1] if i + 1 < len(found) else end
        clauses.setdefault(name, norm[text_start:text_end])
    return clauses


def _modifications(norm: str, tables: frozenset[str]) -> list[tuple[str, dict[str, str]]]:
    """(kind and table, clauses) of each UPDATE or DELETE of one of ``tables``."""
    found = []
    for m in _MODIFY.finditer(norm):
        name = m.group(1) or m.group(3)
        table = _Table.parse(name)
        if table.name not in tables:
            continue
        _, end = _scope(norm, m.start(1) if m.group(1) else m.start(3))
        kind = "UPDATE" if m.group(1) else "DELETE"
        clauses = _clauses(norm, m.end(1) if m.group(1) else m.end(3), end)
        found.append((f'{kind} of "{table.name}"', clauses))
    return found


def _set_values(set_list: str) -> list[str]:
    """The value expressions of a SET list, multi-column sub-SELECTs left out (PostgreSQL
    plans those as resjunk entries, which Citus does not examine)."""
    values = []
    for item in _split_top(set_list):
        _, _, value = item.partition("=")
        if not _SUBQUERY.match(value.strip()):
            values.append(value)
    return values


def _volatile_in_modification(tables: frozenset[str]) -> Callable[[str], str | None]:
    def check(sql: str) -> str | None:
        for what, clauses in _modifications(normalize(sql), tables):
            for clause in ("SET", "FROM", "USING", "WHERE", "RETURNING"):
                m = _VOLATILE.search(clauses.get(clause, ""))
                if m:
                    return f"{m.group(1)}() in the {clause} clause of an {what}"
        return None

    return check


def _stable_with_column_in_modification(tables: frozenset[str]) -> Callable[[str], str | None]:
    def check(sql: str) -> str | None:
        for what, clauses in _modifications(normalize(sql), tables):
            parts = [*_set_values(clauses.get("SET", "")), clauses.get("WHERE", "")]
            for part in parts:
                found = _stable_with_column(_blank_subqueries(part))
                if found:
                    return f"{found} in an {what}"
        return None

    return check


def _case_mutable_in_modification(tables: frozenset[str]) -> Callable[[str], str | None]:
    def check(sql: str) -> str | None:
        for what, clauses in _modifications(normalize(sql), tables):
            parts = [*_set_values(clauses.get("SET", "")), clauses.get("WHERE", "")]
            for part in parts:
                found = _case_mutable(part, _blank_subqueries(part))
                if found:
                    return f"{found} in an {what}"
        return None

    return check


def _mutable_returning(tables: frozenset[str]) -> Callable[[str], str | None]:
    def check(sql: str) -> str | None:
        norm = normalize(sql)
        for what, clauses in _modifications(norm, tables):
            found = _mutable(clauses.get("RETURNING", ""))
            if found:
                return f"{found} in the RETURNING clause of an {what}"
        for m in _INSERT.finditer(norm):
            table = _Table.parse(m.group(1))
            if table.name not in tables:
                continue
            _, end = _scope(norm, m.start(1))
            returning = _clauses(norm, m.end(1), end).get("RETURNING", "")
            found = _mutable(returning)
            if found:
                return f'{found} in the RETURNING clause of an INSERT into "{table.name}"'
        return None

    return check
