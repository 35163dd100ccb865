"""The one place where identifiers (schema and table names) enter SQL text.

Values never do: they travel as bound parameters. Identifiers cannot be bound, so they are
validated against a strict pattern first and then double-quoted.
"""

from __future__ import annotations

import hashlib

from ...core.identifiers import quote_ident
from ...core.validation import check_schema_name


def quote_schema(schema: str) -> str:
    """A schema name validated as the public API requires, then quoted."""
    return quote_ident(check_schema_name(schema))


def partition_table(queue: str) -> str:
    """The (unquoted) name of a queue's own partition: ``j`` + sha224 of the queue name."""
    return "j" + hashlib.sha224(queue.encode()).hexdigest()


__all__ = ["partition_table", "quote_ident", "quote_schema"]
