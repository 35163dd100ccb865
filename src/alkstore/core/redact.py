"""Keeping passwords out of messages: :func:`redact_dsn`."""

from __future__ import annotations

import re
from urllib.parse import urlsplit


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password (in the URI's user part, or a ``password`` parameter)
    replaced by ``***``: every message that shows a DSN shows this."""
    if "://" not in dsn:
        return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", dsn)
    try:
        parts = urlsplit(dsn)
        password = parts.password
    except ValueError:
        return "<an unparsable DSN>"
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = user.partition(":")[0] + ":***@" + host
    query = re.sub(r"(^|&)(password=)[^&]*", r"\1\2***", parts.query)
    return parts._replace(netloc=netloc, query=query).geturl()


__all__ = ["redact_dsn"]
