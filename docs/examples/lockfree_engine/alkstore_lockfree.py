"""An example third-party engine: stock PostgreSQL, claiming jobs without SKIP LOCKED.

It shows the whole recipe: subclass the postgres engine, declare capabilities, register the
class under the ``alkstore.engines`` entry point (see ``pyproject.toml`` beside this file).
"""

from __future__ import annotations

from typing import ClassVar

from alkstore.core.capabilities import Capabilities
from alkstore.engines.postgres import PostgresEngine


class LockFreePostgresEngine(PostgresEngine):
    """PostgreSQL with the atomic-UPDATE claim and split-statement writes."""

    name: ClassVar[str] = "lockfree-postgres"
    capabilities: ClassVar[Capabilities] = Capabilities(skip_locked=False, multi_mutation_cte=False)
