"""Telling which server a connection reached, for ``engine="auto"``, mismatch warnings and
the server-version predicates of the engines' gaps."""

from __future__ import annotations

from ..core.description import ServerInfo
from ..core.plans import Plan, Row, Statement, single
from ..core.records import as_int
from . import BUILTIN, engine_class

DETECT = Statement(
    "SELECT version() AS version, "
    "current_setting('server_version_num') AS server_version_num, "
    "(SELECT string_agg(extname::text, ',') FROM pg_extension) AS extensions"
)


def server_info(rows: list[Row]) -> ServerInfo:
    """What ``DETECT`` returned, as a :class:`ServerInfo`."""
    row = rows[0]
    extensions = frozenset(filter(None, str(row["extensions"] or "").split(",")))
    return ServerInfo(str(row["version"]), as_int(row["server_version_num"]), extensions)


def engine_for(server: ServerInfo) -> str:
    """The first built-in engine whose description recognises ``server`` (else postgres)."""
    for name in BUILTIN:
        detects = engine_class(name).description.detects
        if detects is not None and detects(server):
            return name
    return "postgres"


def detect_plan() -> Plan[ServerInfo]:
    """A plan returning what the server is.

    Transactional, so that on a caller's non-autocommit connection it leaves no implicit
    transaction open behind ``connect``.
    """
    return single("detect", DETECT, server_info, transaction=True)
