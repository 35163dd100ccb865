"""Emulated mode: a distributed engine's SQL on stock PostgreSQL, behind a guard.

A :class:`Profile` lists, as :class:`Rule` objects, the constructs one real server rejects
(``../shared/spec/engines.md``). :func:`guard_sync` and :func:`guard_async` wrap a driver's
source so that every statement is checked before it is sent: a statement the real server
would reject raises :class:`EmulationRejected` naming the construct, and nothing reaches the
database. The wrappers also impose the real server's default isolation level on every
transaction and on statements outside one, and (for CockroachDB) hand integers back as text.
So an engine's alternative code paths are proven on stock PostgreSQL where its server is not
at hand.

Rules match a *normalised* statement (:func:`normalize`): comments gone, string literals
replaced by ``''``, whitespace collapsed, matched case-insensitively. Function and ``DO``
bodies (dollar-quoted or single-quoted after ``AS``/``DO``) are code the server runs, so they
are kept, normalised the same way; any other dollar-quoted string is a literal and goes. The
checks are syntactic and deliberately conservative: they read the SQL the engines emit, not
arbitrary SQL, and a false alarm is cheaper than a construct that slips through.
"""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import lru_cache
from typing import Any

import attrs

from ..core.errors import AlkstoreError
from ..core.plans import Isolation, Row, Statement
from ..drivers.base import AsyncSession, AsyncSource, SyncSession, SyncSource

Memory = set[tuple[str, ...]]
"""What a transaction-spanning rule remembers of the current transaction's statements."""


# --- normalisation ----------------------------------------------------------------------------

_SPACES = re.compile(r"\s+")
_DOLLAR_TAG = re.compile(r"\$(?:[^\W\d][\w]*)?\$")
_BODY_CONTEXT = re.compile(r"(?:\bAS|\bDO(?:\s+LANGUAGE\s+[\w\"]+)?)\s*$", re.IGNORECASE)
_LANGUAGE_CONTEXT = re.compile(r"\bLANGUAGE\s*$", re.IGNORECASE)


def _ident_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$"


def _strip(sql: str) -> str:
    """``sql`` without comments and literals; bodies kept as ``$$ … $$`` (not yet collapsed)."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        elif ch == "/" and sql.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif ch == '"':
            end = i + 1
            while end < n:
                if sql[end] == '"':
                    if sql.startswith('""', end):
                        end += 2
                        continue
                    break
                end += 1
            out.append(sql[i : end + 1])
            i = end + 1
        elif ch == "'":
            escapes = i > 0 and sql[i - 1] in "eE" and (i < 2 or not _ident_char(sql[i - 2]))
            parts: list[str] = []
            j = i + 1
            while j < n:
                c = sql[j]
                if escapes and c == "\\":
                    parts.append(sql[j : j + 2])
                    j += 2
                    continue
                if c == "'":
                    if sql.startswith("''", j):
                        parts.append("'")
                        j += 2
                        continue
                    break
                parts.append(c)
                j += 1
            i = j + 1
            out.append(_literal("".join(parts), "".join(out[-64:])))
        elif ch == "$" and (i == 0 or not _ident_char(sql[i - 1])):
            tag = _DOLLAR_TAG.match(sql, i)
            if tag is None:
                out.append(ch)
                i += 1
                continue
            start = tag.end()
            end = sql.find(tag.group(), start)
            body = sql[start:] if end < 0 else sql[start:end]
            i = n if end < 0 else end + len(tag.group())
            out.append(_literal(body, "".join(out[-64:]), dollar=True))
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _literal(content: str, before: str, *, dollar: bool = False) -> str:
    """What a string literal becomes: a body, a language name, or ``''``."""
    if _BODY_CONTEXT.search(before):
        return f" $$ {_strip(content)} $$ "
    if not dollar and _LANGUAGE_CONTEXT.search(before):
        return f" {content} "  # LANGUAGE 'plpgsql', the old spelling
    return "''"


@lru_cache(maxsize=1024)
def normalize(sql: str) -> str:
    """``sql`` as the rules read it.

    ``--`` and ``/* */`` comments are dropped, string literals (``'…'``, ``E'…'``, and
    dollar-quoted strings that are values) become ``''``, function and ``DO`` bodies are
    kept as ``$$ … $$`` with the same treatment inside, and whitespace runs become one
    space. Case is kept (so snippets read like the original); rules match case-insensitively.
    """
    return _SPACES.sub(" ", _strip(sql)).strip()


# --- parsing helpers ----------------------------------------------------------------------------

_ID = r'(?:"(?:[^"]|"")+"|[^\W\d][\w$]*)'
_NAME = rf"{_ID}(?:\s*\.\s*{_ID}){{0,2}}"
_ID_RE = re.compile(_ID)
_STMT = r"(?:^|[(;)]|\$\$|\b(?:BEGIN|THEN|ELSE|LOOP)\b)\s*"
"""Where a (sub)statement may start: after ``;``, a parenthesis, or in a PL/pgSQL body."""
_NOT_ALIAS = frozenset(
    {
        "set",
        "where",
        "using",
        "from",
        "on",
        "join",
        "inner",
        "left",
        "right",
        "full",
        "cross",
        "natural",
        "returning",
        "for",
        "group",
        "order",
        "limit",
        "offset",
        "window",
        "having",
        "union",
        "except",
        "intersect",
        "lateral",
        "tablesample",
        "as",
        "values",
        "default",
        "select",
        "with",
        "only",
        "fetch",
    }
)
_ALIAS = rf"(?:\s+(?:AS\s+)?(?!(?:{'|'.join(sorted(_NOT_ALIAS))})\b)({_ID}))?"
"""An optional table alias (group), never a keyword that follows a table name."""


def _ident(token: str) -> str:
    """An identifier as PostgreSQL resolves it: unquoted and lowercased, or quoted exactly."""
    token = token.strip()
    if token.startswith('"') and token.endswith('"') and len(token) >= 2:
        return token[1:-1].replace('""', '"')
    return token.lower()


@attrs.frozen
class _Table:
    schema: str | None
    name: str

    @classmethod
    def parse(cls, text: str) -> _Table:
        parts = [_ident(p) for p in _ID_RE.findall(text)]
        return cls(parts[-2] if len(parts) > 1 else None, parts[-1])

    def same(self, other: _Table) -> bool:
        """The same table, taking an unqualified name to mean any schema."""
        return self.name == other.name and (
            self.schema is None or other.schema is None or self.schema == other.schema
        )

    def __str__(self) -> str:
        return f'"{self.name}"'


def _scope(norm: str, pos: int) -> tuple[int, int]:
    """The innermost parenthesised (sub)statement around ``pos``, or its whole statement."""
    depth, start = 0, None
    for k in range(pos - 1, -1, -1):
        ch = norm[k]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                start = k + 1
                break
            depth -= 1
        elif ch == ";" and depth == 0:
            start = k + 1
            break
    depth, end = 0, len(norm)
    for k in range(pos, len(norm)):
        ch = norm[k]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                end = k
                break
            depth -= 1
        elif ch == ";" and depth == 0:
            end = k
            break
    return (0 if start is None else start), end


def _split_top(text: str) -> list[str]:
    """``text`` split at commas outside parentheses."""
    items, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:k])
            start = k + 1
    items.append(text[start:])
    return [item.strip() for item in items]


_CLAUSE_END = re.compile(r"(?:FROM|WHERE|RETURNING|ON\s+CONFLICT)\b", re.IGNORECASE)


def _set_columns(norm: str, start: int) -> list[str]:
    """The columns a ``SET`` list starting at ``start`` assigns."""
    depth, k = 0, start
    while k < len(norm):
        ch = norm[k]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        elif ch == ";" or (
            depth == 0
            and ch.isalpha()
            and (k == 0 or not _ident_char(norm[k - 1]))
            and _CLAUSE_END.match(norm, k)
        ):
            break
        k += 1
    columns: list[str] = []
    for item in _split_top(norm[start:k]):
        group = re.match(r"(?:ROW\s*)?\(([^)]*)\)\s*=", item, re.IGNORECASE)
        if group:
            columns += [_ident(c) for c in group.group(1).split(",") if c.strip()]
            continue
        single = re.match(rf"({_ID})", item)
        if single:
            columns.append(_ident(single.group(1)))
    return columns


def _column_list(text: str) -> list[str]:
    """Plain column names of an index or key column list (expressions give none)."""
    names = []
    for item in _split_top(text):
        m = re.match(rf"({_ID})(?:\s|$)", item + " ")
        if m and not item[m.end(1) :].lstrip().startswith("("):
            names.append(_ident(m.group(1)))
    return names


# --- rules ------------------------------------------------------------------------------------


@attrs.frozen
class Rule:
    """One construct a real server rejects.

    ``check(sql)`` returns the offending snippet of one statement text, or None. A rule about
    a whole transaction (CockroachDB's ADD COLUMN then UPDATE) also has ``track``: inside a
    transaction the guard calls it instead of ``check``, with what the transaction's earlier
    statements left in a memory set, which it extends with what this statement leaves.
    """

    name: str
    """Short, stable rule name (``skip-locked``); test ids and errors use it."""
    why: str
    """One line: why the real server rejects it, with the upstream issue where there is one."""
    check: Callable[[str], str | None]
    """The predicate: the offending snippet of a statement text, or None."""
    track: Callable[[str, Memory], str | None] | None = None
    """For transaction-spanning rules: ``check`` given (and extending) the transaction's memory."""


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

_INSERT = re.compile(rf"{_STMT}INSERT\s+INTO\s+({_NAME})", re.I)
_UPDATE = re.compile(rf"{_STMT}UPDATE\s+(?:ONLY\s+)?({_NAME}){_ALIAS}\s+SET\s+", re.I)
_DELETE = re.compile(rf"{_STMT}DELETE\s+FROM\s+(?:ONLY\s+)?({_NAME})", re.I)
_MERGE = re.compile(rf"{_STMT}MERGE\s+INTO\s+(?:ONLY\s+)?({_NAME})", re.I)
_ON_CONFLICT = re.compile(r"\bON\s+CONFLICT\b", re.I)
_DO_UPDATE_SET = re.compile(r"\bON\s+CONFLICT\b[^;]*?\bDO\s+UPDATE\s+SET\s+", re.I)
_ALTER_TABLE = re.compile(
    rf"\bALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?({_NAME})\s+([^;]*)", re.I
)
_ADD_COLUMN = re.compile(rf"ADD\s+(COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?({_ID})", re.I)
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


# --- citus, distributed job table -------------------------------------------------------------

_ROW_LOCK_ANY = re.compile(rf"{_ROW_LOCK}(?:[^();]*?\bSKIP\s+LOCKED\b)?|\bSKIP\s+LOCKED\b", re.I)
_TABLE_REF = re.compile(rf"(?:\bFROM|\bJOIN|,|\bUSING)\s+(?:ONLY\s+)?({_NAME}){_ALIAS}", re.I)
_PARAM = r"\$\d+(?:\s*::\s*\w+)?(?![\w\[:])"


def _row_lock_filter(table: str, column: str) -> Callable[[str], str | None]:
    col = re.escape(column)
    filters = re.compile(
        rf"({_ID})\s*\.\s*\"?{col}\"?\s*=\s*{_PARAM}"
        rf"|(?<![\w.$])\"?{col}\"?\s*=\s*{_PARAM}"
        rf"|{_PARAM}\s*=\s*({_ID})\s*\.\s*\"?{col}\b"
        rf"|{_PARAM}\s*=\s*\"?{col}\b",
        re.I,
    )

    def check(sql: str) -> str | None:
        norm = normalize(sql)
        if re.match(r"(?:CREATE|ALTER)\s+POLICY\b", norm, re.I):
            return None
        for m in _ROW_LOCK_ANY.finditer(norm):
            start, end = _scope(norm, m.start())
            scope = norm[start:end]
            aliases = {
                _ident(ref.group(2)) if ref.group(2) else table
                for ref in _TABLE_REF.finditer(scope)
                if _Table.parse(ref.group(1)).name == table
            }
            if not aliases:
                continue
            for f in filters.finditer(scope):
                qualifier = f.group(1) or f.group(2)
                if qualifier is None or _ident(qualifier) in aliases:
                    break
            else:
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


def _parenthesised(text: str, open_paren: int) -> str:
    """The text inside the parenthesis that opens at ``open_paren``."""
    _, end = _scope(text, open_paren + 1)
    return text[open_paren + 1 : end]


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


# --- profiles ---------------------------------------------------------------------------------


class EmulationRejected(AlkstoreError):
    """A statement the emulated engine's real server would reject; it was not sent."""

    def __init__(self, profile: str, rule: Rule, snippet: str, sql: str) -> None:
        head = " ".join(sql.split())
        if len(head) > 100:
            head = head[:100] + " ..."
        super().__init__(f"{profile} would reject: {snippet} [{rule.name}] (statement: {head})")
        self.profile = profile
        """The profile's name."""
        self.rule = rule.name
        """The rule's name."""
        self.why = rule.why
        """Why the real server rejects it."""
        self.snippet = snippet
        """The offending part of the statement, as normalised."""
        self.sql = sql
        """The whole statement."""


@attrs.frozen
class Profile:
    """What one real server rejects and how it behaves: its rules, isolation and int typing."""

    name: str
    """The profile name (``cockroachdb``), as engines name it in ``emulation_profile``."""
    rules: tuple[Rule, ...]
    """Every construct the server rejects."""
    isolation: Isolation | None
    """The server's default isolation, forced on everything (None: leave PostgreSQL's)."""
    ints_as_text: bool = False
    """Hand integers in result rows back as ``str``, as the server's INT may reach a client."""

    def rule(self, name: str) -> Rule:
        """The rule called ``name``."""
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise KeyError(f"profile {self.name!r} has no rule {name!r}")

    def violation(
        self, sql: str, memory: dict[str, Memory] | None = None
    ) -> EmulationRejected | None:
        """The error for the first rule ``sql`` breaks, or None if the server would run it.

        ``memory`` is the current transaction's (None outside one): transaction-spanning rules
        read it, and it is extended only when the statement passes every rule.
        """
        updates: dict[str, Memory] = {}
        for rule in self.rules:
            if memory is not None and rule.track is not None:
                seen = set(memory.get(rule.name, ()))
                snippet = rule.track(sql, seen)
                updates[rule.name] = seen
            else:
                snippet = rule.check(sql)
            if snippet is not None:
                return EmulationRejected(self.name, rule, snippet, sql)
        if memory is not None:
            memory.update(updates)
        return None


_ADVISORY_RULE = "advisory-locks"
_PARTITIONING_RULE = "partitioning"
_LISTEN_RULE = "listen-notify"
_CTID_RULE = "ctid"

COCKROACHDB = Profile(
    "cockroachdb",
    (
        Rule(
            "skip-locked",
            "FOR UPDATE … SKIP LOCKED is best-effort under SERIALIZABLE and degrades badly "
            "under contention (https://github.com/cockroachdb/cockroach/issues/97135, "
            "https://github.com/cockroachdb/cockroach/issues/121917)",
            _search(_SKIP_LOCKED),
        ),
        Rule(
            _PARTITIONING_RULE,
            "CockroachDB has no PostgreSQL declarative partitioning (PARTITION BY / PARTITION OF)",
            _search(_PARTITIONING),
        ),
        Rule("deferrable", "CockroachDB has no DEFERRABLE constraints", _search(_DEFERRABLE)),
        Rule(_LISTEN_RULE, "CockroachDB has no LISTEN, NOTIFY or pg_notify", _listen_notify),
        Rule(
            "multi-mutation-cte",
            "CockroachDB refuses a statement that modifies one table more than once unless "
            "every modification is an INSERT without ON CONFLICT",
            _multi_mutation,
        ),
        Rule(
            "covering-index",
            "CockroachDB has no INCLUDE (...) on indexes (it spells it STORING)",
            _search(_INCLUDE),
        ),
        Rule(
            _ADVISORY_RULE,
            "CockroachDB's session advisory locks are stubs that always succeed and its "
            "transaction ones are new and unreliable",
            _search(_ADVISORY),
        ),
        Rule(
            "plpgsql",
            "CockroachDB's PL/pgSQL lacks PERFORM, EXECUTE, FOUND, GET DIAGNOSTICS, "
            "%TYPE/%ROWTYPE, query loops and DDL in functions: the engine defines none",
            _plpgsql,
        ),
        Rule(
            _CTID_RULE,
            "CockroachDB has no ctid system column (a row is found by its primary key)",
            _search(_CTID),
        ),
        Rule(
            "add-column-then-update",
            "CockroachDB cannot UPDATE a column in the transaction whose ALTER TABLE … ADD "
            "COLUMN added it (the schema change completes only after commit)",
            _added_then_updated_in_one_text,
            _added_then_updated,
        ),
    ),
    Isolation.SERIALIZABLE,
    ints_as_text=True,
)
"""CockroachDB: SERIALIZABLE by default, INT may reach the client as text, ten rules."""

YUGABYTEDB = Profile(
    "yugabytedb",
    (
        Rule(
            _ADVISORY_RULE,
            "YugabyteDB has advisory locks only behind a flag in recent versions",
            _search(_ADVISORY),
        ),
        Rule(
            _PARTITIONING_RULE,
            "declarative partitioning DDL in a transaction that also writes fails on "
            "YugabyteDB (https://github.com/yugabyte/yugabyte-db/issues/21833): use none",
            _search(_PARTITIONING),
        ),
        Rule(_LISTEN_RULE, "YugabyteDB has LISTEN/NOTIFY off by default", _listen_notify),
        Rule(
            "deferrable-key",
            "YugabyteDB refuses DEFERRABLE on unique and primary keys (deferrable foreign "
            "keys work)",
            _deferrable_key,
        ),
        Rule("alter-type", "YugabyteDB does not support ALTER TYPE", _search(_ALTER_TYPE)),
        Rule("lock-table", "YugabyteDB does not support LOCK TABLE", _search(_LOCK_TABLE)),
        Rule(
            _CTID_RULE,
            "YugabyteDB rows have no PostgreSQL ctid (they are addressed by ybctid)",
            _search(_CTID),
        ),
        Rule(
            "xid-functions",
            "YugabyteDB has no PostgreSQL transaction ids: the txid_* / pg_current_xact_id "
            "and snapshot functions are unsupported",
            _search(_XID),
        ),
    ),
    Isolation.REPEATABLE_READ,
)
"""YugabyteDB: REPEATABLE READ by default, eight rules."""


def citus_distributed(table: str = "job", column: str = "name") -> Profile:
    """Citus with ``table`` distributed by ``column`` (alkstore: ``job`` by queue ``name``)."""
    return Profile(
        "citus-distributed",
        (
            Rule(
                "row-lock-filter",
                "Citus runs FOR UPDATE / SKIP LOCKED on a distributed table only in a query "
                "routed to one shard: one that filters on the distribution column",
                _row_lock_filter(table, column),
            ),
            Rule(
                "distribution-column-update",
                "Citus can never update a distributed table's distribution column",
                _distribution_update(table, column),
            ),
            Rule(
                "key-without-distribution-column",
                "Citus requires every primary or unique key of a distributed table to include "
                "the distribution column",
                _key_without_column(table, column),
            ),
            Rule(
                "triggers",
                "Citus runs no triggers on distributed tables unless "
                "citus.enable_unsafe_triggers is set: use none",
                _search(_TRIGGER),
            ),
        ),
        None,
    )


CITUS_DISTRIBUTED = citus_distributed()
"""Citus with the job table distributed by queue name: PostgreSQL's isolation, four rules."""

PROFILES: dict[str, Profile] = {p.name: p for p in (COCKROACHDB, YUGABYTEDB, CITUS_DISTRIBUTED)}
"""Profile name -> profile, as engines name it in ``emulation_profile``."""


# --- the guard ----------------------------------------------------------------------------------

_BEGIN = re.compile(r"(?:BEGIN|START\s+TRANSACTION)\b", re.I)
_END = re.compile(
    r"(?:COMMIT|END|ABORT|ROLLBACK)\b(?!\s+(?:TO|PREPARED)\b)(?!.*\bAND\s+CHAIN\b)"
    r"|PREPARE\s+TRANSACTION\b",
    re.I,
)


@attrs.frozen
class _Prelude:
    before: tuple[Statement, ...] = ()
    """Sent before the statement (the session's isolation level, once)."""
    after: tuple[Statement, ...] = ()
    """Sent after it (the forced level, right after a BEGIN sent as a statement)."""


def _text_ints(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return [_text_ints(v) for v in value]
    return value


class _GuardState:
    """What a guarded session tracks, shared by the sync and async wrappers (no I/O here)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.depth = 0
        """``transaction()`` blocks open on this session."""
        self.manual = False
        """A transaction opened by a ``BEGIN`` statement is open."""
        self.memory: dict[str, Memory] = {}
        """Transaction-spanning rules' memory of the current transaction."""
        self._saved: list[dict[str, Memory]] = []
        self.session_level_set = False

    def in_transaction(self) -> bool:
        return self.depth > 0 or self.manual

    def admit(self, statement: Statement) -> _Prelude:
        """Raise :class:`EmulationRejected` for a statement the server would reject, else
        what to send around it."""
        sql = statement.sql
        error = self.profile.violation(sql, self.memory if self.in_transaction() else None)
        if error is not None:
            raise error
        level = self.profile.isolation
        before: tuple[Statement, ...] = ()
        after: tuple[Statement, ...] = ()
        if level is not None and not self.in_transaction() and not self.session_level_set:
            before = (Statement(_session_level_sql(level)),)
        norm = normalize(sql)
        if _BEGIN.match(norm) and not self.in_transaction():
            self.manual, self.memory = True, {}
            if level is not None:
                after = (Statement(f"SET TRANSACTION ISOLATION LEVEL {level.value.upper()}"),)
        elif _END.match(norm) and self.manual and self.depth == 0:
            self.manual, self.memory = False, {}
        return _Prelude(before, after)

    def sent_before(self, prelude: _Prelude) -> None:
        """The prelude's ``before`` statements ran."""
        if prelude.before:
            self.session_level_set = True

    def isolation(self, requested: Isolation | None) -> Isolation | None:
        """The isolation a new transaction gets: the server's default wins over the request."""
        return requested if self.profile.isolation is None else self.profile.isolation

    def enter(self) -> None:
        self.depth += 1
        self._saved.append(copy.deepcopy(self.memory))

    def leave(self, ok: bool) -> None:
        saved = self._saved.pop()
        self.depth -= 1
        if not ok:
            self.memory = saved  # a rolled-back savepoint took its ADD COLUMNs with it
        if not self.in_transaction():
            self.memory = {}

    def rows(self, rows: list[Row]) -> list[Row]:
        if not self.profile.ints_as_text:
            return rows
        return [{key: _text_ints(value) for key, value in row.items()} for row in rows]


def _session_level_sql(level: Isolation) -> str:
    return f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {level.value.upper()}"


class GuardedSyncSession:
    """A :class:`~alkstore.drivers.base.SyncSession` that checks every statement first."""

    def __init__(self, inner: SyncSession, profile: Profile) -> None:
        self.inner = inner
        """The driver's session statements go to."""
        self._state = _GuardState(profile)

    def execute(self, statement: Statement) -> list[Row]:
        """Check ``statement`` (raising :class:`EmulationRejected`, nothing sent), then run it."""
        prelude = self._state.admit(statement)
        for extra in prelude.before:
            self.inner.execute(extra)
        self._state.sent_before(prelude)
        rows = self.inner.execute(statement)
        for extra in prelude.after:
            self.inner.execute(extra)
        return self._state.rows(rows)

    def in_transaction(self) -> bool:
        """Whether the driver's session is inside the caller's transaction."""
        return self.inner.in_transaction()

    @contextmanager
    def transaction(self, isolation: Isolation | None = None) -> Iterator[None]:
        """A transaction at the profile's isolation (the requested one only if it has none)."""
        with self.inner.transaction(self._state.isolation(isolation)):
            self._state.enter()
            try:
                yield
            except BaseException:
                self._state.leave(ok=False)
                raise
            self._state.leave(ok=True)


class GuardedAsyncSession:
    """An :class:`~alkstore.drivers.base.AsyncSession` that checks every statement first."""

    def __init__(self, inner: AsyncSession, profile: Profile) -> None:
        self.inner = inner
        """The driver's session statements go to."""
        self._state = _GuardState(profile)

    async def execute(self, statement: Statement) -> list[Row]:
        """Check ``statement`` (raising :class:`EmulationRejected`, nothing sent), then run it."""
        prelude = self._state.admit(statement)
        for extra in prelude.before:
            await self.inner.execute(extra)
        self._state.sent_before(prelude)
        rows = await self.inner.execute(statement)
        for extra in prelude.after:
            await self.inner.execute(extra)
        return self._state.rows(rows)

    def in_transaction(self) -> bool:
        """Whether the driver's session is inside the caller's transaction."""
        return self.inner.in_transaction()

    @asynccontextmanager
    async def transaction(self, isolation: Isolation | None = None) -> AsyncIterator[None]:
        """A transaction at the profile's isolation (the requested one only if it has none)."""
        async with self.inner.transaction(self._state.isolation(isolation)):
            self._state.enter()
            try:
                yield
            except BaseException:
                self._state.leave(ok=False)
                raise
            self._state.leave(ok=True)


class GuardedSyncSource:
    """A :class:`~alkstore.drivers.base.SyncSource` whose sessions are guarded."""

    def __init__(self, inner: SyncSource, profile: Profile) -> None:
        self.inner = inner
        """The driver's source."""
        self.profile = profile
        """The profile every session enforces."""

    @contextmanager
    def session(self) -> Iterator[SyncSession]:
        """Borrow a guarded session for the duration of the ``with`` block."""
        with self.inner.session() as inner:
            yield GuardedSyncSession(inner, self.profile)

    def close(self) -> None:
        """Close the driver's source."""
        self.inner.close()


class GuardedAsyncSource:
    """An :class:`~alkstore.drivers.base.AsyncSource` whose sessions are guarded."""

    def __init__(self, inner: AsyncSource, profile: Profile) -> None:
        self.inner = inner
        """The driver's source."""
        self.profile = profile
        """The profile every session enforces."""

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """Borrow a guarded session for the duration of the ``async with`` block."""
        async with self.inner.session() as inner:
            yield GuardedAsyncSession(inner, self.profile)

    async def close(self) -> None:
        """Close the driver's source."""
        await self.inner.close()


def guard_sync(source: SyncSource, profile: Profile) -> SyncSource:
    """``source`` behind ``profile``'s guard.

    Every statement is checked before it is sent (:class:`EmulationRejected`, nothing sent,
    for one the real server would reject); every transaction runs at ``profile.isolation``
    whatever was asked for; before the first statement a borrowed session runs outside a
    transaction, ``SET SESSION CHARACTERISTICS`` gives it that level too; with
    ``profile.ints_as_text`` every int in the rows (not bools; also inside arrays) becomes str.

    The session level is set once per *borrowed session*, not once per pooled connection:
    asyncpg's pool sends ``RESET ALL`` when a connection goes back, which undoes it, so a
    per-connection record would go stale. It costs one round trip per borrow that runs an
    untransacted statement, and is lazy, so a borrow that only runs transactions pays nothing.
    """
    return GuardedSyncSource(source, profile)


def guard_async(source: AsyncSource, profile: Profile) -> AsyncSource:
    """``source`` behind ``profile``'s guard; as :func:`guard_sync`, awaiting instead."""
    return GuardedAsyncSource(source, profile)


__all__ = [
    "CITUS_DISTRIBUTED",
    "COCKROACHDB",
    "PROFILES",
    "YUGABYTEDB",
    "EmulationRejected",
    "GuardedAsyncSession",
    "GuardedAsyncSource",
    "GuardedSyncSession",
    "GuardedSyncSource",
    "Memory",
    "Profile",
    "Rule",
    "citus_distributed",
    "guard_async",
    "guard_sync",
    "normalize",
]
