"""An example third-party engine: stock PostgreSQL, claiming jobs without SKIP LOCKED.

It shows the whole recipe: describe the engine (what it lacks and why), let the postgres
engine build its plans for that description, and register the class under the
``alkstore.engines`` entry point (see ``pyproject.toml`` beside this file).
"""

from __future__ import annotations

from typing import ClassVar

from alkstore.core.description import EngineDescription, Gap
from alkstore.engines.delegate import DelegatingEngine
from alkstore.engines.postgres import POSTGRES

CHOSEN = "stock PostgreSQL accepts the construct: this engine leaves it out by choice"

LOCKFREE = POSTGRES.derive(
    name="lockfree-postgres",
    summary="PostgreSQL with the atomic-UPDATE claim and split-statement writes",
    gaps={
        "skip_locked": Gap(why="claims without SKIP LOCKED", no_rule_reason=CHOSEN),
        "multi_mutation_cte": Gap(
            why="changes the job table once per statement", no_rule_reason=CHOSEN
        ),
    },
)


class LockFreePostgresEngine(DelegatingEngine):
    """PostgreSQL with the atomic-UPDATE claim and split-statement writes."""

    description: ClassVar[EngineDescription] = LOCKFREE
