"""Reading SQL for the emulation rules: normalising a statement and finding its parts.

Rules match a *normalised* statement (:func:`normalize`): comments gone, string literals
replaced by ``''``, whitespace collapsed, matched case-insensitively. Function and ``DO``
bodies (dollar-quoted or single-quoted after ``AS``/``DO``) are code the server runs, so they
are kept, normalised the same way; any other dollar-quoted string is a literal and goes. The
helpers here find tables, scopes, ``SET`` lists and column lists in that text; they read the
SQL the engines emit, not arbitrary SQL.
"""

from __future__ import annotations

import re
from functools import lru_cache

import attrs

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


def _parenthesised(text: str, open_paren: int) -> str:
    """The text inside the parenthesis that opens at ``open_paren``."""
    _, end = _scope(text, open_paren + 1)
    return text[open_paren + 1 : end]
