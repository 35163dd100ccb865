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
import re
import shlex
from urllib.parse import parse_qs, unquote, urlsplit

import attrs

from ..core.errors import InvalidOptions
from ..core.identifiers import quote_ident
from ..core.plans import Isolation
from ..core.redact import redact_dsn

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


def check_port(dsn: str) -> None:
    """Refuse a DSN whose port is no port number, with :class:`~alkstore.InvalidOptions`
    naming it: the same rule on every driver (libpq and asyncpg would try to connect, and
    report a connection failure)."""
    ports = [dsn_parameters(dsn).get("port", "")]
    if "://" in dsn:
        hosts = urlsplit(dsn).netloc.rpartition("@")[2]
        for host in hosts.split(","):
            tail = host.rpartition("]")[2] if host.startswith("[") else host
            ports.append(tail.partition(":")[2])
    for given in ports:
        for port in given.split(","):
            if port and not (port.isdigit() and 0 < int(port) < 65536):
                raise InvalidOptions("port", port, "must be a port number (1-65535)")


def _redact(dsn: str) -> str:
    return redact_dsn(dsn)


def invalid_dsn(dsn: str, exc: Exception) -> InvalidOptions:
    """The error for a DSN its driver could not parse: the DSN redacted, the driver's reason
    with the password scrubbed (the driver's own exception is not chained: it may show it)."""
    reason = str(exc)
    password = _password(dsn)
    if password:
        reason = reason.replace(password, "***")
    return InvalidOptions("dsn", dsn, f"the driver cannot use it: {reason}")


def _password(dsn: str) -> str | None:
    if "://" in dsn:
        try:
            return urlsplit(dsn).password or dsn_parameters(dsn).get("password")
        except ValueError:
            return None
    return dsn_parameters(dsn).get("password")


def dsn_parameters(dsn: str) -> dict[str, str]:
    """The connection parameters a DSN sets besides host, port, user, password and database:
    a URI's query (``?connect_timeout=5&options=...``) or a ``key=value`` string's pairs."""
    if "://" in dsn:
        return {key: values[-1] for key, values in parse_qs(urlsplit(dsn).query).items()}
    params: dict[str, str] = {}
    try:
        words = shlex.split(dsn)
    except ValueError:
        return params
    for word in words:
        key, sep, value = word.partition("=")
        if sep:
            params[key.strip()] = value
    return params


def option_settings(options: str) -> dict[str, str]:
    """The ``-c name=value`` (or ``--name=value``) settings of a libpq ``options`` string."""
    found: dict[str, str] = {}
    try:
        words = shlex.split(options)
    except ValueError:
        return found
    pending = False
    for word in words:
        if word == "-c":
            pending = True
            continue
        if pending:
            setting = word
        elif word.startswith("-c") or word.startswith("--"):
            setting = word[2:]
        else:
            continue
        pending = False
        name, sep, value = setting.partition("=")
        if sep:
            found[name.replace("-", "_")] = value
    return found


_UNITS = {"": 0.001, "ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def pg_seconds(value: str) -> float | None:
    """A PostgreSQL duration setting (``5000``, ``5s``, ``2min``) in seconds, else None."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h|d|)\s*", value)
    if match is None:
        return None
    return float(match.group(1)) * _UNITS[match.group(2)]


DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a connection when neither ``connect()`` nor the DSN says."""
DEFAULT_STATEMENT_TIMEOUT = 60.0
"""Seconds the server lets one statement of a store run when neither says."""
DEFAULT_LOCK_TIMEOUT = 30.0
"""Seconds a statement may wait for a lock when neither says."""
DEADLINE_GRACE = 5.0
"""Seconds (at most; no more than the timeout itself) a call may outlast the server's
timeouts before the client gives up on its connection: time for the server's own
cancellation to come back."""


@attrs.frozen(kw_only=True)
class Timeouts:
    """The timeouts a store applies, resolved from ``connect()``, the DSN and the defaults."""

    connect: float
    """Seconds to wait for a connection."""
    server_settings: tuple[tuple[str, str], ...]
    """``statement_timeout`` and ``lock_timeout`` (in ms) for each connection to set, for
    those the DSN does not set itself."""
    call: float | None
    """Seconds after which a statement's connection is abandoned (None: never)."""


def resolve_timeouts(
    dsn: str,
    *,
    connect_timeout: float | None,
    statement_timeout: float | None,
    lock_timeout: float | None,
    server_side: bool,
) -> Timeouts:
    """Each timeout from the ``connect()`` argument, else the DSN, else the default.

    ``server_side`` is false where session settings do not stay with a store (a transaction
    pooler) or mean nothing (an embedded engine): then only the DSN's own settings and the
    client deadline apply."""
    params = dsn_parameters(dsn)
    in_dsn = {**option_settings(params.get("options", "")), **params}
    connect = connect_timeout
    if connect is None:
        connect = pg_seconds(in_dsn.get("connect_timeout", "") + "s") or DEFAULT_CONNECT_TIMEOUT
    settings: list[tuple[str, str]] = []
    effective: dict[str, float | None] = {}
    for name, given, default in (
        ("statement_timeout", statement_timeout, DEFAULT_STATEMENT_TIMEOUT),
        ("lock_timeout", lock_timeout, DEFAULT_LOCK_TIMEOUT),
    ):
        if given is None and name in in_dsn:
            effective[name] = pg_seconds(in_dsn[name])
            continue
        seconds = default if given is None else given
        effective[name] = seconds if server_side else None
        if server_side:
            settings.append((name, str(math.ceil(seconds * 1000))))
    statement = effective["statement_timeout"]
    call = None
    if statement:  # 0 (or unknown) means no limit: no client deadline either
        longest = max(statement, effective["lock_timeout"] or 0.0)
        call = longest + min(DEADLINE_GRACE, longest)
    return Timeouts(connect=float(connect), server_settings=tuple(settings), call=call)


__all__ = [
    "SAVEPOINT",
    "ConnectParams",
    "Timeouts",
    "TransactionSQL",
    "check_port",
    "dsn_parameters",
    "listen_sql",
    "option_settings",
    "parse_dsn",
    "pg_seconds",
    "redact_dsn",
    "resolve_timeouts",
    "set_isolation_sql",
    "transaction_sql",
    "wait_timeout",
]
