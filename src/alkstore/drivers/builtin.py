"""The built-in drivers' registry entries (the ``alkstore.drivers`` entry points point here).

Importing this module imports no client library: each entry names its driver's module, which
the registry imports only when the driver is used.
"""

from __future__ import annotations

from .base import DriverSpec

PSYCOPG = DriverSpec(
    name="psycopg", is_async=False, extra="psycopg", target="alkstore.drivers.psycopg:SYNC"
)
"""psycopg 3, sync face."""
PSYCOPG_ASYNC = DriverSpec(
    name="psycopg", is_async=True, extra="psycopg", target="alkstore.drivers.psycopg:ASYNC"
)
"""psycopg 3, async face."""
ASYNCPG = DriverSpec(
    name="asyncpg", is_async=True, extra="asyncpg", target="alkstore.drivers.asyncpg:ASYNC"
)
"""asyncpg."""
PG8000 = DriverSpec(
    name="pg8000", is_async=False, extra="pg8000", target="alkstore.drivers.pg8000:SYNC"
)
"""pg8000."""

MEMORY = DriverSpec(
    name="memory", is_async=False, extra="", target="alkstore.engines.memory.driver:SYNC"
)
"""The in-memory engine's driver, sync face: no server, no client library (not an entry
point: ``connect`` picks it for a ``memory://`` URI, :func:`alkstore.drivers.scheme_driver`)."""
MEMORY_ASYNC = DriverSpec(
    name="memory", is_async=True, extra="", target="alkstore.engines.memory.driver:ASYNC"
)
"""The in-memory engine's driver, async face."""

SCHEMES = {"memory": (MEMORY, MEMORY_ASYNC)}
"""URI scheme -> its (sync, async) driver, for the schemes that decide the driver."""

ORDER = (PSYCOPG, PSYCOPG_ASYNC, ASYNCPG, PG8000)
"""The built-ins in the order they are listed and tried: the default driver first (entry
points come back in no particular order)."""

__all__ = [
    "ASYNCPG",
    "MEMORY",
    "MEMORY_ASYNC",
    "ORDER",
    "PG8000",
    "PSYCOPG",
    "PSYCOPG_ASYNC",
    "SCHEMES",
]
