"""The embedded engine: PGlite (PostgreSQL in WASM) behind its Node.js bridge.

PGlite is real PostgreSQL, so the SQL is the postgres engine's unchanged. What differs is the
session: the bridge serves one backend session, shared by every client connection, with
transactions running one at a time. The engine therefore declares ``single_connection``: the
store opens exactly one connection, serialises every operation on it (the pool of one is the
lock), and turns off client-side prepared statements, which would collide in the shared
session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from ...core.description import EngineDescription
from ..postgres import POSTGRES, PostgresEngine
from .bridge import start_bridge

PGLITE = POSTGRES.derive(
    name="pglite",
    summary="PGlite (PostgreSQL in WASM) in a Node.js process alkstore owns",
    behaviours={
        "single_connection": "PGlite is one backend session shared by every client "
        "connection; the store uses exactly one connection",
    },
    # Its version() reads like stock PostgreSQL's: a pglite:// URI picks it instead.
    detects=None,
)


class PGliteEngine(PostgresEngine):
    """PGlite 0.5 (PostgreSQL 18) in a Node.js child process that alkstore owns."""

    description: ClassVar[EngineDescription] = PGLITE


def data_dir_of(uri: str) -> str | None:
    """The data directory a ``pglite://`` URI names (None: in memory).

    ``pglite://`` is in memory; ``pglite:///abs/dir`` and ``pglite://rel/dir`` are
    persistent directories.
    """
    parts = urlsplit(uri)
    path = unquote(parts.netloc + parts.path)
    return path or None


def open_pglite(uri: str) -> tuple[str, Callable[[], None]]:
    """Start a bridge for ``uri``; returns its PostgreSQL DSN and the function that stops it."""
    bridge = start_bridge(data_dir_of(uri))

    def close() -> None:
        bridge.close()

    return bridge.dsn, close
