"""Quoting of identifiers: pure string work shared by the engines and the drivers.

Identifiers cannot be bound as parameters, so they are validated against a strict pattern
first and then double-quoted (the engines' schema and table names, the drivers' LISTEN
channels). The engines reach this through :mod:`alkstore.engines.postgres.identifiers`.
"""

from __future__ import annotations

import re

from .errors import InvalidOptions

IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""What an identifier may be: lowercase letters, digits, underscores; at most 63 bytes."""


def quote_ident(name: str, field: str = "identifier") -> str:
    """``name`` double-quoted after validation; :class:`InvalidOptions` naming ``field``."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise InvalidOptions(
            field, name, "not a safe SQL identifier (lowercase letters, digits, underscores)"
        )
    return f'"{name}"'


__all__ = ["IDENTIFIER", "quote_ident"]
