"""The PostgreSQL a benchmark runs on: the user's (``--dsn``) or a durable throwaway one.

Headline figures need durable settings (``fsync``, ``synchronous_commit`` and
``full_page_writes`` on). :class:`~alkstore.conformance.cluster.TempCluster` turns them off
for tests, so :func:`bench_server` starts it with them back on and reads them back from the
server; a server that is not durable is still measured but labelled so everywhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import psycopg

from ..conformance.cluster import TempCluster
from ..conformance.pgbouncer import TempPgBouncer
from ..conformance.servers import server_bindir
from ..engines.postgres.identifiers import quote_schema

DURABLE_SETTINGS: dict[str, str] = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
}
"""What a durable server must have; a throwaway cluster is started with these."""

BENCH_MAX_CONNECTIONS = 300
"""``max_connections`` of a throwaway cluster: 64 consumers per system with room to spare."""


@attrs.frozen
class Durability:
    """The durability settings as the server reports them (``SHOW``)."""

    fsync: str
    synchronous_commit: str
    full_page_writes: str

    @property
    def durable(self) -> bool:
        """Whether a committed job survives a crash of the machine."""
        return (
            self.fsync == "on"
            and self.full_page_writes == "on"
            and self.synchronous_commit != "off"
        )

    @property
    def label(self) -> str:
        """``durable``, or what makes the server non-durable."""
        if self.durable:
            return "durable"
        off = [name for name, value in attrs.asdict(self).items() if value == "off"]
        return "NOT DURABLE (" + ", ".join(f"{name}=off" for name in off) + ")"


@attrs.frozen
class Server:
    """A server ready for benchmarks."""

    dsn: str
    temporary: bool
    """Started for this run (and stopped after it)."""
    durability: Durability
    pooled_dsn: str | None = None
    """The same database through a throwaway PgBouncer in transaction pooling mode
    (``--pgbouncer``), where the measured stores connect; setup and checks use ``dsn``."""


def admin_connection(dsn: str) -> psycopg.Connection[Any]:
    """An autocommit psycopg connection for setup and checks (never timed)."""
    return psycopg.Connection.connect(dsn, autocommit=True)


def read_durability(dsn: str) -> Durability:
    """``SHOW`` the three durability settings."""
    with admin_connection(dsn) as conn:
        values = {
            name: str(conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0])  # type: ignore[index]
            for name in DURABLE_SETTINGS
        }
    return Durability(**values)


PGBOUNCER_POOL_SIZE = 40
"""Server connections of the benchmark's PgBouncer: more than a cell's consumers, so the
pooler shares connections between transactions without making consumers wait for one."""


@contextlib.contextmanager
def bench_server(
    dsn: str | None,
    settings: Mapping[str, str] | None = None,
    pg_version: int | None = None,
    pgbouncer: bool = False,
    pgbouncer_pool: int | None = None,
) -> Iterator[Server]:
    """The server at ``dsn``, or a throwaway durable cluster (stopped on exit); with
    ``pgbouncer``, also a throwaway PgBouncer in front of it (:attr:`Server.pooled_dsn`) with
    ``pgbouncer_pool`` server connections (None: :data:`PGBOUNCER_POOL_SIZE`).

    ``settings`` are extra server settings for a throwaway cluster, ``pg_version`` its major
    version (None: the system's; else installed into the cache when missing, see
    :mod:`alkstore.conformance.servers`); a version is refused with ``dsn``.
    """
    with _server(dsn, settings, pg_version) as server:
        if not pgbouncer:
            yield server
            return
        with TempPgBouncer(server.dsn, pool_size=pgbouncer_pool or PGBOUNCER_POOL_SIZE) as bouncer:
            yield attrs.evolve(server, pooled_dsn=bouncer.dsn)


@contextlib.contextmanager
def _server(
    dsn: str | None, settings: Mapping[str, str] | None, pg_version: int | None
) -> Iterator[Server]:
    if dsn is not None and pg_version is not None:
        raise ValueError("a PostgreSQL version is for the throwaway server: not with a DSN")
    if dsn is not None:
        yield Server(dsn, temporary=False, durability=read_durability(dsn))
        return
    cluster = TempCluster(
        bindir=None if pg_version is None else server_bindir(pg_version),
        max_connections=BENCH_MAX_CONNECTIONS,
        settings={**DURABLE_SETTINGS, **(settings or {})},
    )
    with cluster:
        yield Server(cluster.dsn, temporary=True, durability=read_durability(cluster.dsn))


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a benchmark schema and everything in it."""
    drop = f"DROP SCHEMA IF EXISTS {quote_schema(schema)} CASCADE"  # identifier, quoted
    with admin_connection(dsn) as conn:
        conn.execute(drop)


def create_schema(dsn: str, schema: str) -> None:
    """Create an empty schema (dropping a leftover of an earlier run first)."""
    drop_schema(dsn, schema)
    create = f"CREATE SCHEMA {quote_schema(schema)}"  # identifier, quoted
    with admin_connection(dsn) as conn:
        conn.execute(create)


def checkpoint(dsn: str) -> None:
    """Flush dirty pages before a timed phase, so no cell pays for an earlier one's writes.

    Needs superuser (or ``pg_checkpoint``); without the right it is skipped.
    """
    with admin_connection(dsn) as conn, contextlib.suppress(psycopg.errors.InsufficientPrivilege):
        conn.execute("CHECKPOINT")


STEADY = "steady"
"""The headline preparation: the prefilled tables vacuumed and analysed, then a checkpoint."""
BURST = "burst"
"""A drain right after a burst of jobs: a checkpoint only, no statistics of the prefill."""
VARIANTS = (STEADY, BURST)
"""How a system's tables are prepared between its prefill and its timed drain."""


def prepare_drain(dsn: str, variant: str = STEADY) -> None:
    """What every system's timed drain gets after its prefill, the same for all.

    :data:`STEADY`: ``VACUUM ANALYZE`` (statistics and visibility map of the prefilled
    tables), then :func:`checkpoint` -- a queue that has been running for a while.
    :data:`BURST`: :func:`checkpoint` only, so the drain plans with whatever statistics the
    tables had before the prefill (autovacuum may still catch up during it) -- a burst.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: use one of {', '.join(VARIANTS)}")
    if variant == STEADY:
        with admin_connection(dsn) as conn:
            conn.execute("VACUUM ANALYZE")
    checkpoint(dsn)


def with_search_path(dsn: str, schema: str) -> str:
    """``dsn`` with ``options=-c search_path=<schema>`` for peers that install into it."""
    quote_schema(schema)  # validated: it ends up in a connection option
    separator = "&" if "?" in dsn else "?"
    return f"{dsn}{separator}options=-csearch_path%3D{schema}"


__all__ = [
    "BURST",
    "DURABLE_SETTINGS",
    "STEADY",
    "VARIANTS",
    "Durability",
    "Server",
    "admin_connection",
    "bench_server",
    "checkpoint",
    "create_schema",
    "drop_schema",
    "prepare_drain",
    "read_durability",
    "with_search_path",
]
