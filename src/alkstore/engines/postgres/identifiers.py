"""The one place where identifiers (schema and table names) enter SQL text.

Values never do: they travel as bound parameters. Identifiers cannot be bound, so they are
validated against a strict pattern first and then double-quoted.
"""

from __future__ import annotations

import hashlib
import re

from ...core.validation import check_schema_name

_TABLE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def quote_ident(name: str) -> str:
    """``name`` double-quoted after validation (lowercase letters, digits, underscores)."""
    if not _TABLE.fullmatch(name):
        raise ValueError(f"not a safe SQL identifier: {name!r}")
    return f'"{name}"'


def quote_schema(schema: str) -> str:
    """A schema name validated as the public API requires, then quoted."""
    return quote_ident(check_schema_name(schema))


def partition_table(queue: str) -> str:
    """The (unquoted) name of a queue's own partition: ``j`` + sha224 of the queue name."""
    return "j" + hashlib.sha224(queue.encode()).hexdigest()
