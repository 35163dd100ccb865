"""The embedded engine: PGlite (PostgreSQL in WASM) behind its Node.js bridge.

PGlite is real PostgreSQL, so the SQL is the postgres engine's unchanged. What differs is the
session: the bridge serves one backend session, shared by every client connection, with
transactions running one at a time. The engine therefore declares ``single_connection``: the
store opens exactly one connection, serialises every operation on it (the pool of one is the
lock), and turns off client-side prepared statements, which would collide in the shared
session, unless it started the bridge itself (``pglite://``): then it is the only client,
and the bridge deallocates them when a client disconnects.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from ...core.description import EngineDescription
from ..postgres import POSTGRES, PostgresEngine
from .bridge import Bridge, BridgeError, start_bridge
from .template import Template

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
    session_setup: ClassVar[tuple[str, ...]] = (
        # The postgres engine's two settings (see SESSION_SETUP there) in one round trip and
        # without its pg_settings lookup: PostgreSQL 18 has enable_bitmapscan, and the view
        # cost 20-40 ms of a reopened start's first queries.
        "SELECT set_config('TimeZone', 'UTC', false), "
        "set_config('enable_bitmapscan', 'off', false)",
    )


def data_dir_of(uri: str) -> str | None:
    """The data directory a ``pglite://`` URI names (None: in memory).

    ``pglite://`` is in memory; ``pglite:///abs/dir`` and ``pglite://rel/dir`` are
    persistent directories.
    """
    parts = urlsplit(uri)
    path = unquote(parts.netloc + parts.path)
    return path or None


def open_pglite(
    uri: str, template: Template | None = None
) -> tuple[str, Callable[[], None], Callable[[], None]]:
    """Start a bridge for ``uri``; returns its PostgreSQL DSN, the function that stops it and
    the one to call once the schema is migrated.

    A fresh database starts as a copy of the cached ``template`` (the store migrates that
    schema) or else of the cached base (see :mod:`.template`); what is not cached yet is
    dumped on the way (the base at once, the schema template once migrated).
    """
    data_dir = data_dir_of(uri)
    fresh = data_dir is None or not (Path(data_dir).expanduser() / "PG_VERSION").exists()
    base = Template.base()
    load = None
    if fresh:
        load = next((t for t in (template, base) if t is not None and t.exists()), None)
    bridge = start_bridge(data_dir, load_data_dir=None if load is None else load.path)
    if fresh and load is None:
        _cache(base, bridge)  # no client has connected yet: the database is initdb's

    def close() -> None:
        bridge.close()

    def after_migrate() -> None:
        if template is not None and fresh and load != template:
            _cache(template, bridge, unless_first_use=True)

    return bridge.dsn, close, after_migrate


def _cache(template: Template, bridge: Bridge, *, unless_first_use: bool = False) -> None:
    try:
        if not (unless_first_use and template.first_use()):
            template.save_from(bridge)
    except (BridgeError, OSError) as exc:
        # Only the speed of later fresh starts depends on it.
        warnings.warn(f"could not cache a PGlite database: {exc}", stacklevel=3)
