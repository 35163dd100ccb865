"""The in-memory engine (``alkstore.connect("memory://")``): the reference model of
:mod:`alkstore.core.model` behind the store's API, for users' unit tests (docs/engines.md,
"The in-memory engine")."""

from .database import SCHEME, MemoryDatabase
from .engine import MEMORY, MemoryEngine

__all__ = ["MEMORY", "SCHEME", "MemoryDatabase", "MemoryEngine"]
