"""Capability flags: one boolean per database capability, named after the capability.

Modelled on SQLAlchemy's dialect ``supports_*`` flags. SQL builders branch on these, never on
an engine's name; where a capability is missing the engine uses the documented alternative.
"""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class Capabilities:
    """What a database (as reached through one engine and one driver) can do."""

    skip_locked: bool = True
    """``FOR UPDATE SKIP LOCKED`` claims; else an atomic ``UPDATE`` with a state recheck."""
    multi_mutation_cte: bool = True
    """One statement may change a table twice; else split statements in one transaction."""
    tuple_ids: bool = True
    """A claim re-finds the rows it locked by ``ctid`` (a direct tuple fetch); else by key."""
    table_partitioning: bool = True
    """Declarative ``PARTITION BY LIST``; else one shared job table."""
    deferrable_constraints: bool = True
    """``DEFERRABLE`` unique and foreign keys; else immediate constraints."""
    advisory_locks: bool = True
    """``pg_advisory_xact_lock``; else a claim row in a lock table."""
    covering_indexes: bool = True
    """``CREATE INDEX … INCLUDE``; else plain indexes."""
    listen_notify: bool = True
    """``LISTEN``/``NOTIFY`` wake-ups; else polling."""
    add_column_backfill: bool = True
    """A migration may write a column in the transaction that added it."""
    transactional_heartbeat: bool = True
    """A heartbeat from another session does not abort the worker's transaction."""
    serialization_retries: bool = False
    """The default isolation raises SQLSTATE 40001 that clients must retry."""
    single_connection: bool = False
    """Every operation must share one connection (an embedded database)."""
    plpgsql: bool = True
    """PL/pgSQL functions (used to create per-queue partitions from a bound queue name)."""
    asynchronous_commit: bool = True
    """``SET LOCAL synchronous_commit TO off``: a transaction may return before its WAL flush
    (an idle worker's claim does, see docs/workers.md); else every commit waits."""
    row_triggers: bool = True
    """A row trigger on the job table would run where the statement runs, and so would a
    NOTIFY in a statement that changes a job (not on sharded Citus, where such a statement
    runs on the worker holding the job's shard); else a ``wait`` is not notified (see
    :attr:`notifies_results`)."""

    @property
    def notifies_results(self) -> bool:
        """Whether the statement that finishes a job a ``wait`` marked notifies the schema's
        result channel (docs/workers.md, "Waiting for a result"): it needs LISTEN/NOTIFY, a
        PL/pgSQL function to name the channel, and to run where the listeners are; else a
        wait reads its job again until it has finished."""
        return self.listen_notify and self.plpgsql and self.row_triggers

    def names(self) -> list[str]:
        """Every capability name, in declaration order."""
        return [a.name for a in attrs.fields(type(self))]

    def lacking(self) -> list[str]:
        """The capabilities that are off, other than the two behaviours that are not features
        (``serialization_retries``, ``single_connection``)."""
        return [
            name
            for name in self.names()
            if not getattr(self, name)
            and name not in ("serialization_retries", "single_connection")
        ]
