"""Installing and upgrading the schema: the migration lock and the version record."""

from __future__ import annotations

import hashlib
from typing import Any

from ...core.errors import (
    MigrationLocked,
    SchemaVersionError,
)
from ...core.plans import Plan, Statement, Steps, each
from ...core.records import as_int
from .base import EngineBase
from .schema import LATEST, MIGRATIONS

MIGRATION_LOCK_TIMEOUT = 60
"""Seconds ``migrate`` waits for the migration lock when the session sets no lock_timeout."""


class SchemaMixin(EngineBase):
    """Plans that install, upgrade and read the versioned schema."""

    def _lock_key(self) -> int:
        digest = hashlib.sha256(f"alkstore.migrate.{self.schema}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def migrate(self, target: int = LATEST) -> list[Plan[Any]]:
        """Plans that install or upgrade the schema to ``target``, to run in order.

        The last plan returns the version now installed. It runs in one transaction that
        first takes the migration lock, so when many processes start together exactly one
        migrates and the rest wait, then find the work done. The lock is an advisory lock
        where the engine has them, else a claim row (an ``UPDATE`` of the row of a lock table
        that an untransacted bootstrap plan creates, tolerating a concurrent creator).
        """
        s = self.s
        plans: list[Plan[Any]] = []
        if not self.capabilities.advisory_locks:

            def bootstrap() -> Steps[None]:
                if (yield from self._read_version()) != target:
                    yield from self._claim_row_bootstrap()

            plans.append(self._plan("migrate-bootstrap", bootstrap))

        def steps() -> Steps[int]:
            # Already current: no lock and no DDL, so a role with only USAGE and DML on the
            # schema can open a store with the default migrate=True (docs/deployment.md).
            if (yield from self._read_version()) == target:
                return target
            # Every wait has a deadline: a session without a lock_timeout (a pooler's, a
            # DSN's 0) waits for the lock this long at most (see migration_lock_report).
            yield Statement(
                "SELECT set_config('lock_timeout', $1::text, true) "
                "WHERE current_setting('lock_timeout') = '0'",
                (f"{MIGRATION_LOCK_TIMEOUT * 1000}ms",),
            )
            if self.capabilities.advisory_locks:
                yield Statement("SELECT pg_advisory_xact_lock($1::bigint)", (self._lock_key(),))
                yield Statement(f"CREATE SCHEMA IF NOT EXISTS {s}")
            else:
                # An UPDATE, not SELECT … FOR UPDATE: under REPEATABLE READ or SERIALIZABLE the
                # waiter then fails with 40001 once the winner commits, and its retry starts
                # a fresh snapshot that sees the installed schema.
                yield Statement(
                    f"UPDATE {s}.migration_lock SET claimed_on = now() WHERE name = 'migrate'"
                )
            current = yield from self._read_version()
            if current is not None and current > target:
                raise SchemaVersionError(
                    f"schema {self.schema!r} is at version {current}, newer than this "
                    f"library's {target}: upgrade alkstore"
                )
            for version in range((current or 0) + 1, target + 1):
                for ddl in MIGRATIONS[version](s, self.capabilities):
                    yield Statement(ddl)
            if current is None:
                yield from each(self.after_install())
            yield from each(self.after_upgrade(current or 0, target))
            if current is None:
                yield Statement(f"INSERT INTO {s}.version (version) VALUES ($1)", (target,))
            elif target > current:
                yield Statement(f"UPDATE {s}.version SET version = $1", (target,))
            return target

        plans.append(self._plan("migrate", steps, transaction=True))
        return plans

    def migration_lock_report(self) -> Plan[MigrationLocked]:
        """The error for a migration that timed out waiting for the lock, naming the
        sessions that hold it (from ``pg_locks`` and ``pg_stat_activity``) where the lock is
        an advisory lock; a claim row's holder cannot be named portably."""
        key = self._lock_key()
        high, low = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF

        def steps() -> Steps[MigrationLocked]:
            if not self.capabilities.advisory_locks:
                return MigrationLocked(
                    f"schema {self.schema!r}: timed out waiting for the migration lock "
                    f"(lock_timeout); another session is migrating it (this engine has no "
                    f"advisory locks, so the holder of the {self.schema}.migration_lock row "
                    f"cannot be named): try again when it has finished"
                )
            holders = yield Statement(
                "SELECT a.pid, a.application_name, a.client_addr::text AS client_addr, "
                "a.usename::text AS usename, a.state "
                "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted "
                "AND l.classid::bigint = $1::bigint AND l.objid::bigint = $2::bigint "
                "AND l.objsubid = 1",
                (high, low),
            )
            who = "; ".join(
                f"pid {h['pid']} (application_name {h['application_name']!r}, user "
                f"{h['usename']!r}, client {h['client_addr'] or 'local or hidden'}, "
                f"{h['state']})"
                for h in holders
            )
            return MigrationLocked(
                f"schema {self.schema!r}: timed out waiting for the migration lock (lock_timeout"
                f"); held by {who or 'a session that has since let it go: try again'}"
            )

        return self._plan("migration_lock_report", steps)

    def _claim_row_bootstrap(self) -> Steps[None]:
        # Concurrent "IF NOT EXISTS" creators can still collide on the catalog's unique
        # indexes (23505), or find the table's row type already made by the winner (42710);
        # the loser's error only means the object now exists.
        exists = frozenset({"23505", "42710", "42P06", "42P07"})
        s = self.s
        yield Statement(f"CREATE SCHEMA IF NOT EXISTS {s}", tolerate=exists)
        yield Statement(
            f"CREATE TABLE IF NOT EXISTS {s}.migration_lock "
            "(name text PRIMARY KEY, claimed_on timestamptz)",
            tolerate=exists,
        )
        yield Statement(
            f"INSERT INTO {s}.migration_lock (name) VALUES ('migrate') ON CONFLICT DO NOTHING"
        )

    def _read_version(self) -> Steps[int | None]:
        rows = yield Statement(
            "SELECT to_regclass($1::text) IS NOT NULL AS installed", (f"{self.s}.version",)
        )
        if not rows[0]["installed"]:
            return None
        rows = yield Statement(f"SELECT version FROM {self.s}.version")
        return as_int(rows[0]["version"]) if rows else None

    def schema_version(self) -> Plan[int | None]:
        """The version recorded in the database (None when nothing is installed)."""
        return self._plan("schema_version", self._read_version)

    def check_version(self) -> Plan[int | None]:
        """Like :meth:`schema_version`, but refuses a database newer than this library."""

        def steps() -> Steps[int | None]:
            current = yield from self._read_version()
            if current is not None and current > LATEST:
                raise SchemaVersionError(
                    f"schema {self.schema!r} is at version {current}, newer than this "
                    f"library's {LATEST}: upgrade alkstore"
                )
            return current

        return self._plan("check_version", steps)
