"""YugabyteDB: the postgres engine without advisory locks, partitioning or LISTEN/NOTIFY.

Partitioning DDL in a transaction that also writes fails there (yugabyte-db#21833), advisory
locks are behind a flag, LISTEN/NOTIFY is off by default, and DEFERRABLE is refused on unique
and primary keys. Its default isolation is REPEATABLE READ, so serialization failures are
retried.
"""

from __future__ import annotations

from typing import ClassVar

from ..core.capabilities import Capabilities
from ..core.plans import Isolation
from .postgres import PostgresEngine


class YugabyteDBEngine(PostgresEngine):
    """YugabyteDB (2.20+)."""

    name: ClassVar[str] = "yugabytedb"
    capabilities: ClassVar[Capabilities] = Capabilities(
        tuple_ids=False,
        table_partitioning=False,
        # Deferrable foreign keys work there, deferrable unique/primary keys do not; the
        # engine uses neither, and declares the capability off to stay on the safe side.
        deferrable_constraints=False,
        advisory_locks=False,
        listen_notify=False,
        serialization_retries=True,
    )
    isolation: ClassVar[Isolation | None] = Isolation.REPEATABLE_READ
    emulation_profile: ClassVar[str | None] = "yugabytedb"
