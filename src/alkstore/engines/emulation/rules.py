"""The rule type and the library of rules the product profiles are made of.

Each predicate reads one statement text (normalised by :mod:`.lexer`) and returns the
offending snippet or None. The checks are syntactic and deliberately conservative: a false
alarm is cheaper than a construct that slips through to a real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from .lexer import (
    _ADD_COLUMN,
    _ALTER_TABLE,
    _DELETE,
    _ID,
    _INSERT,
    _MERGE,
    _NAME,
    _ON_CONFLICT,
    _STMT,
    _UPDATE,
    _ident,
    _parenthesised,
    _scope,
    _set_columns,
    _split_top,
    _Table,
    normalize,
)

Memory = set[tuple[str, ...]]
"""What a transaction-spanning rule remembers of the current transaction's statements."""


@attrs.frozen
class Rule:
    """One construct a real server rejects.

    ``check(sql)`` returns the offending snippet of one statement text, or None. A rule about
    a whole transaction (CockroachDB's ADD COLUMN then UPDATE) also has ``track``: inside a
    transaction the guard calls it instead of ``check``, with what the transaction's earlier
    statements left in a memory set, which it extends with what this statement leaves.
    """

    id: str
    """Short, stable rule id (``skip-locked``); test ids, errors and the docs table use it."""
    reason: str
    """One line: what the real server rejects and why."""
    source: str
    """Where the limitation is documented: the product's docs, an issue, or its source."""
    check: Callable[[str], str | None]
    """The predicate: the offending snippet of a statement text, or None."""
    track: Callable[[str, Memory], str | None] | None = None
    """For transaction-spanning rules: ``check`` given (and extending) the transaction's memory."""
    capability: str | None = None
    """The :class:`~alkstore.core.capabilities.Capabilities` flag the engine turns off because
    of this limitation (its alternative SQL avoids the construct), or None for a product
    limitation that no flag names."""


def _search(pattern: re.Pattern[str]) -> Callable[[str], str | None]:
    """A predicate: the first match of ``pattern`` (its group 1 when it has one) in the SQL."""

    def check(sql: str) -> str | None:
        m = pattern.search(normalize(sql))
        if m is None:
            return None
        return m.group(1) if pattern.groups and m.group(1) else m.group(0)

    return check


_ROW_LOCK = r"\bFOR\s+(?:NO\s+KEY\s+UPDATE|KEY\s+SHARE|UPDATE|SHARE)\b"
_SKIP_LOCKED = re.compile(rf"{_ROW_LOCK}[^();]*?\bSKIP\s+LOCKED\b|\bSKIP\s+LOCKED\b", re.I)
_PARTITIONING = re.compile(
    rf"\)\s*(PARTITION\s+BY\s+(?:RANGE|LIST|HASH)\s*\([^)]*\))"
    rf"|\b(PARTITION\s+OF\s+{_NAME}|(?:ATTACH|DETACH)\s+PARTITION\b)",
    re.I,
)
_DEFERRABLE = re.compile(
    r"(?<!\bNOT )\bDEFERRABLE(?:\s+INITIALLY\s+(?:DEFERRED|IMMEDIATE))?\b"
    r"|\bINITIALLY\s+DEFERRED\b",
    re.I,
)
_LISTEN = re.compile(
    rf"{_STMT}((?:UN)?LISTEN\s+(?:\*|{_ID})|NOTIFY\s+{_ID})|\b(pg_notify\s*\()", re.I
)
_INCLUDE = re.compile(r"\)\s*(INCLUDE\s*\([^)]*\))", re.I)
_ADVISORY = re.compile(r"\bpg_\w*advisory\w*\s*\(", re.I)
_PLPGSQL = re.compile(r"\bLANGUAGE\s+\"?plpgsql\"?(?!\w)", re.I)
_DO_BLOCK = re.compile(r"(?:^|;)\s*(DO\s+(?:LANGUAGE\s+[\w\"]+\s+)?\$\$)", re.I)
_ALTER_TYPE = re.compile(rf"{_STMT}(ALTER\s+TYPE\s+{_NAME})", re.I)
_CTID = re.compile(r"\b(ctid)\b", re.I)
_LOCK_TABLE = re.compile(rf"{_STMT}(LOCK\s+(?:TABLE\s+)?(?:ONLY\s+)?{_NAME})", re.I)
_XID = re.compile(
    r"\b(?:txid_\w+|pg_current_xact_id\w*|pg_xact_status|pg_xact_commit_timestamp\w*"
    r"|pg_current_snapshot|pg_snapshot_\w+|pg_visible_in_snapshot)\s*\(",
    re.I,
)
_TRIGGER = re.compile(
    rf"(?:^|;)\s*(CREATE\s+(?:OR\s+REPLACE\s+)?(?:CONSTRAINT\s+)?TRIGGER\s+{_ID})", re.I
)

_NOT_COLUMNS = frozenset({"constraint", "primary", "unique", "check", "foreign", "exclude"})
_CONSTRAINT_KIND = re.compile(r"\b(PRIMARY\s+KEY|UNIQUE|REFERENCES|EXCLUDE|CHECK)\b", re.I)


def _listen_notify(sql: str) -> str | None:
    m = _LISTEN.search(normalize(sql))
    return None if m is None else (m.group(1) or m.group(2))


def _plpgsql(sql: str) -> str | None:
    norm = normalize(sql)
    m = _PLPGSQL.search(norm)
    if m is not None:
        return m.group(0)
    block = _DO_BLOCK.search(norm)
    return None if block is None else f"{block.group(1)} … $$ (a DO block is PL/pgSQL)"


def _mutations(piece: str) -> list[tuple[str, _Table, bool]]:
    """(kind, table, plain) of each INSERT/UPDATE/DELETE/MERGE of one statement, in order."""
    found: list[tuple[int, str, _Table, bool]] = []
    for m in _INSERT.finditer(piece):
        _, end = _scope(piece, m.start(1))
        plain = _ON_CONFLICT.search(piece, m.end(), end) is None
        found.append((m.start(1), "INSERT", _Table.parse(m.group(1)), plain))
    for pattern, kind in ((_UPDATE, "UPDATE"), (_DELETE, "DELETE"), (_MERGE, "MERGE")):
        for m in pattern.finditer(piece):
            found.append((m.start(1), kind, _Table.parse(m.group(1)), False))
    return [(kind, table, plain) for _, kind, table, plain in sorted(found, key=lambda f: f[0])]


def _multi_mutation(sql: str) -> str | None:
    for piece in normalize(sql).split(";"):
        mutations = _mutations(piece)
        for i, (_, table, _) in enumerate(mutations):
            same = [m for m in mutations[i:] if m[1].same(table)]
            if len(same) > 1 and not all(plain for _, _, plain in same):
                kinds = ", ".join(kind for kind, _, _ in same)
                return f"multi-mutation CTE on table {table} ({kinds})"
    return None


def _added_then_updated(sql: str, memory: Memory) -> str | None:
    """Remember ``ALTER TABLE … ADD COLUMN`` columns; flag an UPDATE that sets one of them."""
    norm = normalize(sql)
    events: list[tuple[int, bool, _Table, list[str]]] = []
    for m in _ALTER_TABLE.finditer(norm):
        added = []
        for action in _split_top(m.group(2)):
            add = _ADD_COLUMN.match(action)
            if add and (add.group(1) or _ident(add.group(2)) not in _NOT_COLUMNS):
                added.append(_ident(add.group(2)))
        if added:
            events.append((m.start(), True, _Table.parse(m.group(1)), added))
    for m in _UPDATE.finditer(norm):
        events.append((m.start(1), False, _Table.parse(m.group(1)), _set_columns(norm, m.end())))
    for _, is_add, table, columns in sorted(events, key=lambda e: e[0]):
        if is_add:
            memory.update((table.schema or "", table.name, column) for column in columns)
            continue
        for column in columns:
            for schema, name, added_column in memory:
                if added_column == column and table.same(_Table(schema or None, name)):
                    return (
                        f"UPDATE of column {column!r} of table {table} in the transaction "
                        "whose ALTER TABLE … ADD COLUMN added it"
                    )
    return None


def _added_then_updated_in_one_text(sql: str) -> str | None:
    return _added_then_updated(sql, set())


def _deferrable_key(sql: str) -> str | None:
    """DEFERRABLE (or INITIALLY DEFERRED) on anything but a foreign key."""
    norm = normalize(sql)
    for m in _DEFERRABLE.finditer(norm):
        kinds = list(_CONSTRAINT_KIND.finditer(norm, 0, m.start()))
        kind = " ".join(kinds[-1].group(1).upper().split()) if kinds else None
        if kind != "REFERENCES":
            return f"{m.group(0)} on {kind or 'a constraint that is no foreign key'}"
    return None


_ON_CONFLICT_TARGET = re.compile(r"\bON\s+CONFLICT\s*\(", re.I)
_EXCLUDE = re.compile(r"(\bEXCLUDE\s+(?:USING\s+\w+\s*)?\()", re.I)
_INHERITS = re.compile(r"\)\s*(INHERITS\s*\()", re.I)
_GIST = re.compile(r"\bUSING\s+(gist)\b", re.I)
_TWO_PHASE = re.compile(
    rf"{_STMT}((?:PREPARE\s+TRANSACTION|COMMIT\s+PREPARED|ROLLBACK\s+PREPARED)\b)", re.I
)


def _on_conflict_expression(sql: str) -> str | None:
    """An ``ON CONFLICT (…)`` target that is an expression, not a list of columns."""
    norm = normalize(sql)
    for m in _ON_CONFLICT_TARGET.finditer(norm):
        target = _parenthesised(norm, m.end() - 1)
        for item in _split_top(target):
            if not re.fullmatch(rf"{_ID}(?:\s+{_ID})?", item):
                return f"ON CONFLICT ({target.strip()})"
    return None
