"""What ``connect`` was pointed at: an engine instance plus a DSN or a caller's connection.

A ``pglite://`` URI starts the embedded engine's Node.js bridge here; the store stops it on
close.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import attrs

from .core.errors import InvalidOptions
from .engines import engine_class
from .engines.postgres import PostgresEngine

PGLITE_SCHEME = "pglite"


def _nothing() -> None:
    return None


@attrs.frozen
class Target:
    """An engine and where to reach its database."""

    engine: PostgresEngine
    dsn: str | None
    """A URI to open connections to, or None when ``native`` is the caller's connection."""
    native: Any = None
    close: Callable[[], None] = _nothing
    """Releases what resolving started (the PGlite bridge); idempotent."""


def resolve_target(dsn: Any, engine: str | None, schema: str) -> Target:
    """Pick the engine (explicit, or from the URI scheme) and start what it needs."""
    if not isinstance(dsn, str):
        return Target(engine_class(engine or "postgres")(schema), None, native=dsn)
    scheme = urlsplit(dsn).scheme
    if scheme == PGLITE_SCHEME:
        if engine not in (None, PGLITE_SCHEME):
            raise InvalidOptions("engine", engine, "a pglite:// URI needs engine='pglite'")
        from .engines.pglite import open_pglite

        real_dsn, close = open_pglite(dsn)
        return Target(engine_class(PGLITE_SCHEME)(schema), real_dsn, close=close)
    if scheme not in ("postgres", "postgresql"):
        raise InvalidOptions("dsn", dsn, "must be a postgresql:// or pglite:// URI")
    return Target(engine_class(engine or "postgres")(schema), dsn)
