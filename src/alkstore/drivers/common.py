"""Helpers two or more drivers share: DSN parsing and transaction control statements.

pg8000 takes host/port/user/password/database as separate arguments and has no DSN parser of
its own, so :func:`parse_dsn` turns a libpq-style URI into those (psycopg hands the DSN to
libpq and asyncpg parses it itself, so neither needs this). asyncpg and pg8000 open
transactions and savepoints with the statements from :func:`transaction_sql` (psycopg uses its
own ``Connection.transaction()``, and takes only :func:`set_isolation_sql` from here): asyncpg's
``Connection.transaction()`` refuses to run inside a transaction the caller began with a plain
``BEGIN``, and pg8000 has no transaction helper at all.
"""

from __future__ import annotations

import getpass
import math
from urllib.parse import parse_qs, unquote, urlsplit

import attrs

from ..core.errors import InvalidOptions
from ..core.identifiers import quote_ident
from ..core.plans import Isolation

SAVEPOINT = "alkstore_savepoint"
"""The savepoint name nested transactions use.

PostgreSQL lets a name be reused: ``RELEASE`` and ``ROLLBACK TO`` act on the most recent
savepoint of that name, so nested blocks can share the one name."""

_BEGIN: dict[Isolation | None, str] = {
    None: "BEGIN",
    Isolation.READ_COMMITTED: "BEGIN ISOLATION LEVEL READ COMMITTED",
    Isolation.REPEATABLE_READ: "BEGIN ISOLATION LEVEL REPEATABLE READ",
    Isolation.SERIALIZABLE: "BEGIN ISOLATION LEVEL SERIALIZABLE",
}
_SET_ISOLATION: dict[Isolation, str] = {
    Isolation.READ_COMMITTED: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
    Isolation.REPEATABLE_READ: "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    Isolation.SERIALIZABLE: "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
}


@attrs.frozen
class TransactionSQL:
    """The statements that open, commit and roll back one transaction or savepoint."""

    begin: str
    commit: str
    rollback: tuple[str, ...]
    """Run in order; a savepoint is rolled back to and then released."""


def transaction_sql(isolation: Isolation | None, *, nested: bool) -> TransactionSQL:
    """Statements for a transaction, or for a savepoint when ``nested``.

    A savepoint cannot change the isolation level: the enclosing transaction's applies, so
    ``isolation`` is ignored when ``nested``.
    """
    if nested:
        return TransactionSQL(
            begin=f"SAVEPOINT {SAVEPOINT}",
            commit=f"RELEASE SAVEPOINT {SAVEPOINT}",
            rollback=(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}", f"RELEASE SAVEPOINT {SAVEPOINT}"),
        )
    return TransactionSQL(
        begin=_BEGIN[_isolation(isolation)], commit="COMMIT", rollback=("ROLLBACK",)
    )


def set_isolation_sql(isolation: Isolation) -> str:
    """``SET TRANSACTION ISOLATION LEVEL …``: the first statement of a transaction."""
    level = _isolation(isolation)
    assert level is not None
    return _SET_ISOLATION[level]


def _isolation(isolation: Isolation | None) -> Isolation | None:
    # Accept the enum's string values too; anything else is a KeyError/ValueError, never SQL.
    return None if isolation is None else Isolation(isolation)


def listen_sql(channel: str) -> str:
    """``LISTEN "channel"``: the channel validated and quoted (identifiers are never bound)."""
    return f"LISTEN {quote_ident(channel, 'channel')}"


def wait_timeout(timeout: float) -> float:
    """A listener's ``wait`` timeout, checked: seconds, finite and not negative."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise InvalidOptions("timeout", timeout, "must be a number of seconds")
    if not math.isfinite(timeout) or timeout < 0:
        raise InvalidOptions("timeout", timeout, "must be finite and >= 0: every wait ends")
    return float(timeout)


@attrs.frozen(kw_only=True)
class ConnectParams:
    """What a ``postgresql://`` URI names, as separate connection arguments."""

    user: str
    host: str = "localhost"
    port: int = 5432
    password: str | None = None
    database: str | None = None
    sslmode: str | None = None


def parse_dsn(dsn: str) -> ConnectParams:
    """Parse ``postgresql://user:password@host:port/dbname?sslmode=…`` (libpq URI form).

    Query parameters ``host``, ``port``, ``user``, ``password``, ``dbname`` and ``sslmode``
    override the parts of the URI, as in libpq. Other query parameters are ignored. As in
    libpq, the user defaults to the OS user's name and the host to ``localhost``.
    """
    parts = urlsplit(dsn)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a postgresql:// URI: {_redact(dsn)}")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = query.get("host") or (unquote(parts.hostname) if parts.hostname else None)
    port = query.get("port") or (str(parts.port) if parts.port is not None else None)
    user = query.get("user") or (unquote(parts.username) if parts.username else None)
    password = query.get("password") or (unquote(parts.password) if parts.password else None)
    database = query.get("dbname") or (unquote(parts.path[1:]) if len(parts.path) > 1 else None)
    return ConnectParams(
        host=host or "localhost",
        port=int(port) if port else 5432,
        user=user or getpass.getuser(),
        password=password,
        database=database,
        sslmode=query.get("sslmode"),
    )


def _redact(dsn: str) -> str:
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


__all__ = [
    "SAVEPOINT",
    "ConnectParams",
    "TransactionSQL",
    "listen_sql",
    "parse_dsn",
    "set_isolation_sql",
    "transaction_sql",
    "wait_timeout",
]
