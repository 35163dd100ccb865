"""The raw-SQL ceiling with lanes: fetchers that start at different points of the queue.

The ceiling's table (:mod:`.rawsql`) with a ``lane`` column (the job's position in its
enqueued batch modulo the number of lanes, one lane per consumer) and the queued index on
``(lane, id)``. Each consumer thread has a lane of its own and claims from it in id order
with ``SKIP LOCKED``, then from the next lanes while its own is empty. No claim walks past
rows another fetcher holds until lanes run empty; the price is the order: jobs leave in id
order only within a lane (a declared alternative, issue 33), so this peer measures what
lanes could buy, not a guarantee alkstore keeps.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

from ...engines.postgres.identifiers import quote_schema
from ..progress import Progress
from ..results import DrainResult
from .rawsql import Connections, Fetch, Statements, drain_with, unavailable, versions
from .spec import DrainSpec

NAME = "raw-sql-lanes"


class LaneStatements(Statements):
    """The ceiling's SQL with a lane per job."""

    def __init__(self, schema: str, lanes: int) -> None:
        super().__init__(schema)
        self.lanes = lanes
        s = quote_schema(schema)
        self.create = (
            f"""CREATE TABLE {s}.job (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                lane int NOT NULL,
                state text NOT NULL DEFAULT 'queued',
                data jsonb)""",
            f"CREATE INDEX job_queued ON {s}.job (lane, id) WHERE state = 'queued'",
        )
        # {s} is quoted by quote_schema; every value is a bound parameter.
        self.insert = f"""INSERT INTO {s}.job (data, lane)
            SELECT d::jsonb, (o % $2)::int FROM unnest($1::text[]) WITH ORDINALITY AS u(d, o)"""
        self.claim = f"""UPDATE {s}.job SET state = 'active'
            WHERE id IN (SELECT id FROM {s}.job WHERE state = 'queued' AND lane = $2
                         ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING id, data"""

    def insert_params(self, data: list[str]) -> tuple[Any, ...]:
        """The payloads and the number of lanes."""
        return (data, self.lanes)


def _lane_claim(pool: Connections, sql: LaneStatements) -> Fetch:
    lanes = sql.lanes
    homes = itertools.count()
    local = threading.local()

    def fetch(n: int) -> Sequence[Any]:
        if not hasattr(local, "home"):
            local.home = next(homes) % lanes
        with pool.cursor() as cur:
            for step in range(lanes):
                cur.execute(sql.claim, (n, (local.home + step) % lanes), prepare=True)
                ids = [row[0] for row in cur.fetchall()]
                if ids:
                    return ids
        return []

    return fetch


def drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """Pre-enqueue, warm up, and time the drain with lanes."""
    lanes = LaneStatements(schema, spec.consumers)
    return drain_with(dsn, spec, schema, progress, NAME, lanes, _lane_claim)


__all__ = ["NAME", "LaneStatements", "drain", "unavailable", "versions"]
