"""Cached, initialised PGlite databases: what a fresh ``pglite://`` store starts from.

Most of a fresh start is initdb (a second PGlite instance running ``initdb.wasm``), then the
schema migration. Neither depends on anything but the PGlite version and our schema, so
fresh starts (in memory, or a new data directory) load a tarball from the per-user cache
instead (docs/engines.md, "PGlite"): the *base* (just initdb'd, dumped by the first fresh
start of a PGlite version before any client connects) or, better, a *schema template* (the
base with one schema migrated, dumped once migrated by the second fresh start that migrates
that schema: a schema used once, such as the demo's random one, is never dumped).

The tarballs live in the bridge's install directory, whose name already changes with the
PGlite version (the hash of ``package-lock.json``); a schema template's name hashes the
schema name, the engine options, the latest migration version and the source of the SQL
that the migrations run, so any of those changing makes a new one. Concurrent first starts
are safe: a dump is written under an exclusive, non-blocking file lock (a process that finds
it taken skips dumping: the other one writes the same database) to a temporary file renamed
into place.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from ..postgres import schema
from .bridge import Bridge, ensure_installed

__all__ = ["Template"]

_SQL_SOURCES: Final = Path(schema.__file__).resolve().parent
_DIRECTORY: Final = "templates"
_LOCK: Final = ".dump.lock"


def _sql_fingerprint() -> str:
    digest = hashlib.sha256()
    for source in sorted(_SQL_SOURCES.glob("*.py")):
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


@attrs.frozen
class Template:
    """One cached database: the base, or a schema template."""

    path: Path
    """The tarball (it exists once a fresh start has dumped it)."""

    @classmethod
    def base(cls) -> Template:
        """The database as initdb leaves it, for every fresh start without a schema template."""
        return cls(ensure_installed() / _DIRECTORY / "base.tar")

    @classmethod
    def for_schema(cls, schema_name: str, engine_options: Mapping[str, Any]) -> Template:
        """The template a store with this schema and these engine options starts from."""
        identity = json.dumps(
            {
                "schema": schema_name,
                "options": {str(k): repr(v) for k, v in sorted(engine_options.items())},
                "version": schema.LATEST,
                "sql": _sql_fingerprint(),
            },
            sort_keys=True,
        )
        key = hashlib.sha256(identity.encode()).hexdigest()[:16]
        return cls(ensure_installed() / _DIRECTORY / f"db-{key}.tar")

    def exists(self) -> bool:
        """Whether the tarball is there to load."""
        return self.path.is_file()

    def first_use(self) -> bool:
        """Note a fresh start that migrated this schema; whether it is the first one noted."""
        marker = self.path.with_suffix(".seen")
        marker.parent.mkdir(parents=True, exist_ok=True)
        try:
            marker.touch(exist_ok=False)
        except FileExistsError:
            return False
        return True

    def save_from(self, bridge: Bridge) -> bool:
        """Dump ``bridge``'s database as this template unless it exists or is being written.

        Returns whether this call wrote it. Call it while no client has a transaction open
        (right after the start for the base, right after the migration for a schema).
        """
        if self.exists():
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.parent / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # another process is writing this same database now
            if self.exists():
                return False
            bridge.dump_data_dir(self.path)
            return True
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)  # also releases the flock
