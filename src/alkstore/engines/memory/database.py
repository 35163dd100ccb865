"""The in-memory database: named or anonymous, holding schemas of the reference model's state
(:class:`~alkstore.core.model.Model`) behind one lock.

``memory://`` is a database of its own for the store that opens it; ``memory://NAME`` is shared
by every store of the process connected to ``NAME`` while one of them is open (a producer and
a worker store in one test). Each schema of a database is the reference model of
:mod:`alkstore.core.model` plus what the model leaves to an engine: the queues' timestamps, the
schema version, the supervisor's next maintenance pass. One re-entrant lock per database
makes every operation atomic across threads, and a plan that asks for a transaction gets one:
its schema is restored when it raises (:meth:`MemoryDatabase.transaction`).
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

import attrs

from ...core.errors import InvalidOptions, SchemaVersionError
from ...core.model import Model
from ...core.plans import Plan, Steps
from ...core.records import WorkerProcess
from ...core.schedules import Schedule

T = TypeVar("T")

SCHEME = "memory"
"""The URI scheme of the in-memory engine."""

VERSION = 1
"""The schema version the in-memory engine installs (its own: nothing is stored on disk)."""


def now() -> dt.datetime:
    """The wall clock, as every operation of the engine reads it."""
    return dt.datetime.now(dt.UTC)


@attrs.define
class MemorySchema:
    """One schema: the model and the engine's own records around it."""

    model: Model
    version: int = VERSION
    queue_times: dict[str, tuple[dt.datetime, dt.datetime]] = attrs.field(factory=dict)
    """Queue name -> (created_on, updated_on)."""
    next_pass: dt.datetime | None = None
    """When the next maintenance pass may be claimed (None: now)."""
    schedules: dict[tuple[str, str], Schedule] = attrs.field(factory=dict)
    """Cron schedules by (queue, key)."""
    subscriptions: set[tuple[str, str]] = attrs.field(factory=set)
    """Pub/sub subscriptions as (event, queue)."""
    processes: dict[str, WorkerProcess] = attrs.field(factory=dict)
    """The records of the processes running workers, by owner."""
    pass_owner: str | None = None
    """Who claimed the latest maintenance pass."""

    def at_now(self) -> Model:
        """The model with its clock set to the wall clock (never backwards)."""
        self.model.now = max(self.model.now, now())
        return self.model

    def snapshot(self) -> dict[str, Any]:
        """Everything an operation may change, copied (for a rollback)."""
        state = {k: v for k, v in vars(self.model).items() if k != "jitter"}
        own = {k: v for k, v in attrs.asdict(self, recurse=False).items() if k != "model"}
        return copy.deepcopy({"model": state, "own": own})

    def restore(self, saved: dict[str, Any]) -> None:
        """Put back what :meth:`snapshot` copied."""
        vars(self.model).update(saved["model"])
        for name, value in saved["own"].items():
            setattr(self, name, value)


class MemoryDatabase:
    """Schemas by name behind one re-entrant lock."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.lock = threading.RLock()
        self.schemas: dict[str, MemorySchema] = {}
        self.users = 0
        self._random = random.Random()

    def install(self, schema: str) -> MemorySchema:
        """The schema, created at :data:`VERSION` when missing."""
        with self.lock:
            found = self.schemas.get(schema)
            if found is None:
                model = Model(now(), jitter=self._random.random)
                found = self.schemas[schema] = MemorySchema(model)
            return found

    def schema(self, schema: str) -> MemorySchema:
        """An installed schema at a version this library knows."""
        found = self.schemas.get(schema)
        if found is None:
            raise SchemaVersionError(
                f"schema {schema!r} is not installed in this memory database: connect with "
                "migrate=True (the default)"
            )
        if found.version > VERSION:
            raise SchemaVersionError(
                f"schema {schema!r} is at version {found.version}, newer than this library's "
                f"{VERSION}"
            )
        return found

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Every schema as it was before the block when the block raises."""
        with self.lock:
            saved = {name: s.snapshot() for name, s in self.schemas.items()}
            try:
                yield
            except BaseException:
                for name in list(self.schemas):
                    if name not in saved:
                        del self.schemas[name]
                for name, state in saved.items():
                    self.install(name).restore(state)
                raise


def steps_of(action: Callable[[], T]) -> Steps[T]:
    """Steps that run ``action`` and yield no statement."""
    result = action()
    yield from ()
    return result


class SchemaPlans:
    """Builds the plans of one schema of a memory database."""

    def __init__(self, database: MemoryDatabase, schema: str) -> None:
        self.database = database
        self.schema = schema

    def _plan(
        self, name: str, action: Callable[[MemorySchema], T], *, transaction: bool = False
    ) -> Plan[T]:
        """A plan running ``action`` on the schema, its clock set to now (``transaction``:
        every change undone when it raises)."""

        def run() -> T:
            with self.database.lock:
                schema = self.database.schema(self.schema)
                schema.at_now()
                return action(schema)

        return Plan(name, lambda: steps_of(run), transaction=transaction)

    def _model(self, name: str, action: Callable[[Model], T]) -> Plan[T]:
        return self._plan(name, lambda schema: action(schema.model))


_named: dict[str, MemoryDatabase] = {}
_named_lock = threading.Lock()


def database_name(dsn: str) -> str | None:
    """The database a ``memory://`` URI names (None: an anonymous one of its own)."""
    parts = urlsplit(dsn)
    if parts.scheme != SCHEME or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise InvalidOptions(
            "dsn", dsn, "a memory URI is memory:// (a database of its own) or memory://NAME"
        )
    return parts.netloc or None


def attach(name: str | None) -> MemoryDatabase:
    """The database called ``name`` (created on first use), or a new anonymous one; pair each
    call with :func:`detach`."""
    with _named_lock:
        if name is None:
            database = MemoryDatabase(None)
        else:
            database = _named.setdefault(name, MemoryDatabase(name))
        database.users += 1
        return database


def detach(database: MemoryDatabase) -> None:
    """A store of ``database`` closed: a named database is forgotten with its last store."""
    with _named_lock:
        database.users -= 1
        if database.users == 0 and database.name is not None:
            _named.pop(database.name, None)
