"""Peers measured in the same run as alkstore.

The raw-SQL ceiling, pg-boss, pgqueuer and procrastinate.

Each peer module offers ``NAME``, ``unavailable()`` (None, or why it cannot run here: no
Node.js, a package not installed) and ``drain(dsn, spec, schema, progress)`` returning a
:class:`~alkstore.bench.results.DrainResult`. :func:`run_peer` turns a peer that cannot run,
or fails, into an :class:`~alkstore.bench.results.Unavailable` row instead of an error.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..progress import Progress
from ..report import err
from ..results import Cell, Outcome, Unavailable
from .spec import DrainSpec

PEERS = {
    "raw-sql": "rawsql",
    "pg-boss": "pgboss",
    "pgqueuer": "pgqueuer_peer",
    "procrastinate": "procrastinate_peer",
}
"""Peer name -> its module in this package."""


def peer_module(name: str) -> ModuleType:
    """The module that drives peer ``name``."""
    return importlib.import_module(f"{__name__}.{PEERS[name]}")


def run_peer(name: str, dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> Outcome:
    """Drain with peer ``name``; an unavailable or failing peer becomes an Unavailable row."""
    cell = Cell(system=name, consumers=spec.consumers, batch=spec.batch)
    module = peer_module(name)
    reason: str | None = module.unavailable()
    if reason is not None:
        return Unavailable(cell=cell, reason=reason)
    try:
        result: Outcome = module.drain(dsn, spec, schema, progress)
    except Exception as exc:
        err.print(f"[red]{name} failed:[/red] {type(exc).__name__}: {exc}")
        return Unavailable(cell=cell, reason=f"failed: {type(exc).__name__}: {exc}")
    return result


def peer_versions(names: list[str]) -> dict[str, object]:
    """Versions each available peer reports (Node.js and pg-boss for pg-boss)."""
    versions: dict[str, object] = {}
    for name in names:
        module = peer_module(name)
        if module.unavailable() is None:
            versions.update(module.versions())
    return versions


__all__ = ["PEERS", "DrainSpec", "peer_module", "peer_versions", "run_peer"]
