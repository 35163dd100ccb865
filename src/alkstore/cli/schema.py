"""``alkstore migrate [--dry-run]``: install or upgrade a store's schema.

The only admin command that changes a schema. ``--dry-run`` runs the migration in a
transaction it then rolls back, and prints every statement it ran there: exactly the SQL a
real run would send now, against the schema as it is. PostgreSQL's DDL is transactional, so
nothing stays behind (the migration's locks are held until the rollback, as in a real run).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import alkstore
from alkstore.core.plans import Isolation, Row, Statement
from alkstore.drivers.base import SyncSession
from alkstore.runner import run_sync

from .common import add_store_arguments, emit_json


def register(subparsers: Any) -> None:
    """Add the ``migrate`` subcommand."""
    parser = subparsers.add_parser("migrate", help="install or upgrade the schema")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the SQL it would run; change nothing"
    )
    add_store_arguments(parser, json_help='print {"schema", "from", "to", "dry_run", ...}')
    parser.set_defaults(handler=_migrate)


def _migrate(args: argparse.Namespace) -> int:
    # No statement timeout: building the new indexes of a large job table may take longer
    # than the per-call default; waiting for the migration lock stays bounded (lock_timeout).
    with alkstore.connect(
        args.dsn,
        engine=args.engine,
        driver=args.driver,
        schema=args.schema,
        migrate=False,
        statement_timeout=0,
    ) as store:
        before = store.schema_version()
        if args.dry_run:
            statements, after = dry_run(store)
        else:
            statements, after = [], store.migrate()
    if args.json:
        document: dict[str, Any] = {
            "schema": args.schema,
            "from": before,
            "to": after,
            "dry_run": args.dry_run,
        }
        if args.dry_run:
            document["statements"] = [
                {"sql": s.sql, "params": [str(p) for p in s.params]} for s in statements
            ]
        emit_json(document)
        return 0
    if before == after:
        print(f"schema {args.schema!r} is at version {after}, the latest: nothing to do")
        return 0
    if not args.dry_run:
        print(f"schema {args.schema!r} migrated from version {before} to {after}")
        return 0
    start = "not installed" if before is None else f"version {before}"
    print(f"-- schema {args.schema!r}: {start} -> version {after} (dry run: nothing changed)")
    for statement in statements:
        print(render(statement))
    return 0


def render(statement: Statement) -> str:
    """One statement as a line of a SQL script, its bound values in a comment."""
    values = ", ".join(f"${i} = {p!r}" for i, p in enumerate(statement.params, start=1))
    return f"{statement.sql.strip()};" + (f"  -- {values}" if values else "")


class _Rollback(Exception):
    """Ends the dry run's transaction by rolling it back."""


class _Recording:
    """A session that runs statements on another and keeps each one."""

    def __init__(self, session: SyncSession, seen: list[Statement]) -> None:
        self._session = session
        self._seen = seen

    def execute(self, statement: Statement) -> list[Row]:
        self._seen.append(statement)
        return self._session.execute(statement)

    def transaction(self, isolation: Isolation | None = None) -> AbstractContextManager[None]:
        return self._session.transaction(isolation)

    def in_transaction(self) -> bool:
        return self._session.in_transaction()


class _OneSession:
    """A source that always hands out the same session."""

    def __init__(self, session: SyncSession) -> None:
        self._session = session

    @contextmanager
    def session(self) -> Iterator[SyncSession]:
        yield self._session

    def close(self) -> None:
        """Nothing to close: the session is borrowed."""


def dry_run(store: alkstore.Store) -> tuple[list[Statement], int]:
    """Run ``store``'s migration in a transaction that is rolled back; returns the
    statements it ran and the version it would have reached."""
    seen: list[Statement] = []
    version = 0
    with store._source.session() as session:
        try:
            with session.transaction():
                source = _OneSession(_Recording(session, seen))
                for plan in store.engine.migrate():
                    version = int(run_sync(source, store.driver, plan))
                raise _Rollback
        except _Rollback:
            pass
    return seen, version
