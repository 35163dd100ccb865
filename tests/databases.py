"""Scratch databases on the run's PostgreSQL server, for tests that need a database of their
own (database-level settings, a catalog no other test touches)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


@contextmanager
def scratch_database(pg_dsn: str, prefix: str, **settings: str) -> Iterator[str]:
    """The DSN of a new database named ``prefix_…`` on ``pg_dsn``'s server whose sessions
    default to ``settings`` (name -> value), dropped afterwards."""
    database = f"{prefix}_{uuid.uuid4().hex[:12]}"
    name = sql.Identifier(database)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
        for setting, value in settings.items():
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    name, sql.Identifier(setting), sql.Literal(value)
                )
            )
    try:
        yield urlunsplit(urlsplit(pg_dsn)._replace(path=f"/{database}"))
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(name))
