"""How a job's ``trace_context`` is stored in the SQL engines' ``trace_context`` jsonb column.

Every state change rewrites a job's whole row, so the context's width is paid on each one
(docs/observability.md, "Overhead"). The common context, a lone W3C ``traceparent`` of
version 00, is stored compactly as a JSON *string*: the base64 of its 26 bytes (version,
trace id, parent id, flags), 44 bytes in the row instead of the 79 of the JSON object. Any
other context (``tracestate``, another propagator's headers) is stored as its JSON object.
A user's context is always a mapping, so the two forms cannot be confused, and a row
written either way (or by an earlier version) reads back as the same mapping.
"""

from __future__ import annotations

import binascii
import functools
import json
import re
from collections.abc import Mapping

TRACEPARENT = "traceparent"
"""The W3C Trace Context header a compact context holds."""

_COMPACT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
"""A version-00 ``traceparent`` in its canonical (lower-case) form: the only one whose bytes
give the same text back."""


def trace_context_json(context: Mapping[str, str]) -> str:
    """The JSON text stored for ``context`` (see the module docstring)."""
    parent = context.get(TRACEPARENT)
    if len(context) == 1 and parent is not None and _COMPACT.fullmatch(parent):
        raw = bytes.fromhex(parent.replace("-", ""))
        return '"' + binascii.b2a_base64(raw, newline=False).decode().rstrip("=") + '"'
    return json.dumps(context, separators=(",", ":"))


def read_trace_context(text: str | None) -> dict[str, str] | None:
    """The ``trace_context`` column read as text, as the mapping that was sent (None: none)."""
    if text is None:
        return None
    if text[0] != '"':
        context: dict[str, str] = json.loads(text)
        return context
    return {TRACEPARENT: _traceparent(text)}


@functools.lru_cache(maxsize=64)
def _traceparent(text: str) -> str:
    """The ``traceparent`` of a compact context (cached: the jobs a batch fetches were
    mostly sent together, with one context)."""
    raw = binascii.a2b_base64(text[1:-1] + "=")
    return f"00-{raw[1:17].hex()}-{raw[17:25].hex()}-{raw[25]:02x}"


__all__ = ["TRACEPARENT", "read_trace_context", "trace_context_json"]
