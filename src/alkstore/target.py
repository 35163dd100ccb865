"""What ``connect`` was pointed at, and which engine serves it.

A ``pglite://`` URI starts the embedded engine's Node.js bridge here; the store stops it on
close. ``engine="auto"`` picks the engine from what the server says it is; an explicit
engine that does not match the server is used as asked, with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from .core.contracts import Engine
from .core.description import ServerInfo
from .core.errors import InvalidOptions
from .engines import engine_class
from .engines.detect import engine_for

PGLITE_SCHEME = "pglite"
AUTO = "auto"


def _nothing() -> None:
    return None


@attrs.frozen
class Target:
    """Where to reach the database, and what engine was asked for."""

    requested: str
    """An engine name, or ``auto``."""
    dsn: str | None
    """A URI to open connections to, or None when ``native`` is the caller's connection."""
    native: Any = None
    close: Callable[[], None] = _nothing
    """Releases what resolving started (the PGlite bridge); idempotent."""
    after_migrate: Callable[[], None] = _nothing
    """Called once the store has migrated the schema (caches a fresh PGlite database)."""
    sole_client: bool = False
    """The store is the only client of a server it started (a ``pglite://`` bridge)."""

    @property
    def needs_detection(self) -> bool:
        """Whether the server must be asked what it is (auto, or to warn on a mismatch)."""
        return self.requested != PGLITE_SCHEME


def resolve_target(
    dsn: Any, engine: str | None, migrated: tuple[str, Mapping[str, Any]] | None = None
) -> Target:
    """Pick the requested engine (explicit, or from the URI scheme) and start what it needs.

    ``migrated``: the schema name and engine options the store will migrate, if it does; a
    fresh PGlite database then starts from the cached, migrated one.
    """
    if engine == "memory":
        raise InvalidOptions("dsn", dsn, "engine 'memory' runs on a memory:// URI only")
    if not isinstance(dsn, str):
        return Target(engine or "postgres", None, native=dsn)
    scheme = urlsplit(dsn).scheme
    if scheme == PGLITE_SCHEME:
        if engine not in (None, PGLITE_SCHEME):
            raise InvalidOptions("engine", engine, "a pglite:// URI needs engine='pglite'")
        from .engines.pglite.engine import open_pglite
        from .engines.pglite.template import Template

        template = None if migrated is None else Template.for_schema(*migrated)
        real_dsn, close, after_migrate = open_pglite(dsn, template)
        return Target(
            PGLITE_SCHEME, real_dsn, close=close, after_migrate=after_migrate, sole_client=True
        )
    if scheme not in ("postgres", "postgresql"):
        raise InvalidOptions("dsn", dsn, "must be a postgresql:// or pglite:// URI")
    return Target(engine or "postgres", dsn)


def build_engine(
    requested: str,
    server: ServerInfo | None,
    schema: str,
    *,
    emulate: bool,
    options: Mapping[str, Any],
) -> Engine:
    """The engine for ``requested`` (or, for ``auto``, the one that recognises ``server``).

    An explicit engine whose description does not recognise the server is used as asked,
    with a warning. Emulated, the server is stock PostgreSQL: its version decides nothing.
    """
    name = requested
    if requested == AUTO:
        name = "postgres" if server is None else engine_for(server)
    engine = engine_class(name).configure(
        schema, options, emulated=emulate, server=None if emulate else server
    )
    description = engine.description
    if emulate:
        if description.emulation_profile is None:
            raise InvalidOptions("emulate", True, f"engine {name!r} has no emulated mode")
    elif (
        server is not None
        and requested != AUTO
        and description.detects is not None
        and not description.detects(server)
    ):
        warnings.warn(
            f"engine {engine.name!r} was chosen but the server looks like {engine_for(server)!r}",
            stacklevel=3,
        )
    return engine
