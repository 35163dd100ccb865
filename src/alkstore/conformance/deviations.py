"""The deviation registry: why an engine lacks a capability, with the upstream reference.

Every test the suite skips on an engine points here, so a skip always carries its reason.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs


@attrs.frozen
class Deviation:
    """One documented gap of one engine."""

    why: str
    upstream: str = ""
    applies: Callable[[tuple[int, ...]], bool] = lambda _version: True
    """Server-version predicate: does the gap exist on this server version?"""


REGISTRY: dict[str, dict[str, Deviation]] = {
    "pglite": {
        "single_connection": Deviation(
            "PGlite is one backend session shared by every client connection; the store "
            "uses exactly one connection"
        ),
    },
    "cockroachdb": {
        "skip_locked": Deviation(
            "SKIP LOCKED is best-effort under SERIALIZABLE and degrades under contention",
            "https://github.com/cockroachdb/cockroach/issues/97135",
        ),
        "multi_mutation_cte": Deviation(
            "multiple mutations of the same table in one statement are not supported",
            "https://www.cockroachlabs.com/docs/stable/common-table-expressions",
        ),
        "table_partitioning": Deviation(
            "no PostgreSQL declarative partitioning (PARTITION BY / PARTITION OF)",
            "https://www.cockroachlabs.com/docs/stable/partitioning",
        ),
        "advisory_locks": Deviation(
            "advisory lock functions are stubs or new and unreliable",
            "https://github.com/cockroachdb/cockroach/issues/13546",
        ),
        "plpgsql": Deviation("PL/pgSQL beyond the basics (EXECUTE, format) is missing"),
    },
    "yugabytedb": {
        "table_partitioning": Deviation(
            "partitioning DDL in a transaction that also writes fails",
            "https://github.com/yugabyte/yugabyte-db/issues/21833",
        ),
        "advisory_locks": Deviation("advisory locks are behind a flag in recent versions only"),
    },
    "citus-distributed": {
        "table_partitioning": Deviation(
            "the job table is sharded by queue name instead of partitioned",
            "https://docs.citusdata.com/en/stable/develop/reference_workarounds.html",
        ),
    },
}


def explain(engine: str, capability: str) -> str:
    """The registered reason for ``engine`` lacking ``capability``."""
    entry = REGISTRY.get(engine, {}).get(capability)
    if entry is None:
        return "declared by the engine's capability profile"
    return f"{entry.why} ({entry.upstream})" if entry.upstream else entry.why
