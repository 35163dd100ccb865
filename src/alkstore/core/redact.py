"""Keeping passwords out of messages: :func:`redact_dsn` (plain text work: core does no I/O
and parses no URLs with I/O libraries)."""

from __future__ import annotations

import re

_URI_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/?#@]*:)[^/?#]*@")
_PARAM_PASSWORD = re.compile(r"((?:^|[?&\s])password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)")


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password (in a URI's user part, or a ``password`` parameter of a
    URI's query or a ``key=value`` string) replaced by ``***``: every message that shows a
    DSN shows this."""
    return _PARAM_PASSWORD.sub(r"\1***", _URI_PASSWORD.sub(r"\1***@", dsn))


__all__ = ["redact_dsn"]
