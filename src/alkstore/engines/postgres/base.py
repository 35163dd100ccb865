"""What every operation family of the postgres engine stands on: the engine's state (schema,
effective capabilities, isolation) and the plan builders that apply them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Self, TypeVar

from ...core.description import EngineDescription, ServerInfo
from ...core.errors import QueueNotFound, UnsupportedByEngine
from ...core.plans import Plan, Row, Statement, Steps, single
from ...core.validation import check_engine_options
from .identifiers import quote_schema
from .sql import result_note

T = TypeVar("T")


class EngineBase:
    """The postgres engine's state and plan builders; the operation families mix into it."""

    description: ClassVar[EngineDescription]
    """What the engine is (set by :class:`~.engine.PostgresEngine` and the engines built on
    it)."""
    option_names: ClassVar[frozenset[str]] = frozenset()
    """``engine_options`` keys :meth:`configure` accepts (none)."""
    claim_gate: bool | Literal["auto"] = False
    """Plain claims pass the queue's gate (:mod:`.claim_gate`; ``"auto"``: while it pays): set
    by the engine option ``claim_gate`` where the engine takes it
    (:class:`~.engine.PostgresEngine`)."""

    def __init__(
        self,
        schema: str = "alkstore",
        *,
        emulated: bool = False,
        server: ServerInfo | None = None,
        description: EngineDescription | None = None,
    ) -> None:
        described = description or self.description
        self.name = described.name
        self.schema = schema
        self.s = quote_schema(schema)
        self.emulated = emulated
        """Running on stock PostgreSQL behind this engine's emulation guard."""
        self.capabilities = described.capabilities_on(None if emulated else server)
        """The description's capabilities, with gaps the server does not have closed."""
        self.isolation = described.isolation
        """Isolation every transaction of this engine runs at (None: the server default)."""

    @classmethod
    def configure(
        cls,
        schema: str,
        options: Mapping[str, Any],
        *,
        emulated: bool = False,
        server: ServerInfo | None = None,
    ) -> Self:
        """The engine on ``schema``; ``options`` must be among :attr:`option_names`."""
        check_engine_options(cls.option_names, options)
        return cls(schema, emulated=emulated, server=server)

    def after_install(self) -> Iterable[Statement]:
        """Statements run right after a fresh install, in the same transaction."""
        return []

    def after_upgrade(self, installed: int, target: int) -> Iterable[Statement]:
        """Statements run right after the migrations that brought a schema from version
        ``installed`` (0: nothing, after :meth:`after_install`) to ``target``, in the same
        transaction."""
        return []

    @functools.cached_property
    def _built_sql(self) -> dict[tuple[Any, ...], str]:
        return {}

    @property
    def _note(self) -> str:
        """:func:`~.sql.result_note` of this engine's schema: the finishing statements'
        notice to the waiters of the jobs they finish."""
        return result_note(self.s, self.capabilities)

    def built_once(self, shape: tuple[Any, ...], build: Callable[[], str]) -> str:
        """The SQL of ``shape`` (a tuple naming the statement and its variant), made by
        ``build`` the first time this engine asks for it and kept: the claim statements are
        composed from many fragments, and composing them per call showed in profiles."""
        sql = self._built_sql.get(shape)
        if sql is None:
            sql = self._built_sql[shape] = build()
        return sql

    def _plan(self, name: str, steps: Any, *, transaction: bool = False, **kw: Any) -> Plan[Any]:
        caps = self.capabilities
        return Plan(
            name,
            steps,
            transaction=transaction,
            isolation=self.isolation if transaction else None,
            retry_serialization=caps.serialization_retries,
            **kw,
        )

    def _single(
        self,
        name: str,
        sql: str,
        params: Sequence[Any],
        result: Callable[[list[Row]], T],
        **kw: Any,
    ) -> Plan[T]:
        caps = self.capabilities
        return single(
            name,
            Statement(sql, tuple(params)),
            result,
            retry_serialization=caps.serialization_retries,
            **kw,
        )

    def _require(self, capability: str, what: str) -> None:
        if not getattr(self.capabilities, capability):
            raise UnsupportedByEngine(self.name, capability, what)

    def _require_queue(self, name: str, field: str = "queue") -> Steps[None]:
        found = yield Statement(f"SELECT 1 AS found FROM {self.s}.queue WHERE name = $1", (name,))
        if not found:
            raise QueueNotFound(name, field=field)
