"""The engine registry: built-in engines by name, third-party ones by entry point.

A third-party engine is any class satisfying :class:`~alkstore.core.contracts.Engine`
(checked structurally), registered under the ``alkstore.engines`` entry-point group.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from ..core.contracts import Engine, missing_members
from ..core.errors import InvalidOptions

BUILTIN = {
    "postgres": "alkstore.engines.postgres:PostgresEngine",
    "cockroachdb": "alkstore.engines.cockroachdb:CockroachDBEngine",
    "yugabytedb": "alkstore.engines.yugabytedb:YugabyteDBEngine",
    "citus": "alkstore.engines.citus:CitusEngine",
    "citus-distributed": "alkstore.engines.citus:CitusDistributedEngine",
    "pglite": "alkstore.engines.pglite.engine:PGliteEngine",
    "memory": "alkstore.engines.memory.engine:MemoryEngine",
}
"""Built-in engine name -> ``module:class``."""


def available() -> list[str]:
    """Names of every engine this installation can use."""
    names = set(BUILTIN)
    names.update(ep.name for ep in entry_points(group="alkstore.engines"))
    return sorted(names)


def engine_class(name: str) -> type[Engine]:
    """The engine class registered as ``name``, checked against the engine contract."""
    if name in BUILTIN:
        module, attr = BUILTIN[name].split(":")
        cls = getattr(importlib.import_module(module), attr)
    else:
        found = [ep for ep in entry_points(group="alkstore.engines") if ep.name == name]
        if not found:
            raise InvalidOptions("engine", name, f"known engines are {', '.join(available())}")
        cls = found[0].load()
    if not isinstance(cls, type):
        raise InvalidOptions("engine", name, f"{cls!r} is not a class")
    missing = missing_members(cls)
    if missing:
        raise InvalidOptions(
            "engine",
            name,
            f"{cls.__qualname__} does not satisfy the engine contract "
            f"(alkstore.core.contracts.Engine): missing {', '.join(missing)}",
        )
    engine: type[Engine] = cls
    return engine
