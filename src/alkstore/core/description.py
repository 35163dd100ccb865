"""What alkstore knows about one engine, in one value: :class:`EngineDescription`.

A description names the engine, lists each capability it lacks as a :class:`Gap` (why, the
upstream reference, the emulation guard rules that enforce it or why none can, and the
server versions it applies to), the behaviours it needs (serialization retries, a single
connection), its isolation, its emulation guard profile and how to recognise its server.
The capability matrix, the conformance skip messages and the guard's per-capability rules
are all read from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from .capabilities import Capabilities
from .plans import Isolation

BEHAVIOURS = ("serialization_retries", "single_connection")
"""Capability flags that describe a need of the server, not a feature it may lack."""


@attrs.frozen
class ServerInfo:
    """What detection read from a server: ``version()``, ``server_version_num``, extensions."""

    version: str
    """The text of ``SELECT version()``."""
    version_num: int
    """``server_version_num`` (the PostgreSQL version the server is compatible with)."""
    extensions: frozenset[str] = frozenset()
    """Names of the installed extensions."""


def _always(_server: ServerInfo) -> bool:
    return True


@attrs.frozen(kw_only=True)
class Gap:
    """Why an engine lacks one capability, and what keeps code from using it anyway."""

    why: str
    """One line: what the server does not do."""
    upstream_url: str = ""
    """The upstream issue or documentation page, where there is one."""
    guard_rules: tuple[str, ...] = ()
    """Ids of the emulation guard rules that reject the construct on the emulated server."""
    no_rule_reason: str | None = None
    """Why no guard rule can exist, when ``guard_rules`` is empty."""
    applies: Callable[[ServerInfo], bool] = _always
    """Does the gap exist on this server? False turns the capability back on at connect."""

    def explain(self) -> str:
        """The reason with its reference, as skip messages and the docs show it."""
        return f"{self.why} ({self.upstream_url})" if self.upstream_url else self.why


def _check_gaps(_instance: object, _attribute: object, gaps: Mapping[str, Gap]) -> None:
    features = [n for n in Capabilities().names() if n not in BEHAVIOURS]
    unknown = sorted(set(gaps) - set(features))
    if unknown:
        raise ValueError(f"gaps name unknown capabilities {unknown}; capabilities: {features}")


def _check_behaviours(_instance: object, _attribute: object, needs: Mapping[str, str]) -> None:
    unknown = sorted(set(needs) - set(BEHAVIOURS))
    if unknown:
        raise ValueError(f"behaviours {unknown} are not among {list(BEHAVIOURS)}")


@attrs.frozen(kw_only=True)
class EngineDescription:
    """One engine: its name, gaps, needs, isolation, guard profile and server detection."""

    name: str
    """The engine name users pass to ``connect(engine=...)``."""
    summary: str
    """One line for the docs: what server this engine serves."""
    gaps: Mapping[str, Gap] = attrs.field(factory=dict, validator=_check_gaps)
    """Lacking capability -> its gap. Every capability not named here is present."""
    behaviours: Mapping[str, str] = attrs.field(factory=dict, validator=_check_behaviours)
    """Behaviour flag the server needs (``serialization_retries``, ``single_connection``) ->
    why."""
    isolation: Isolation | None = None
    """Isolation every transaction runs at (None: the server's default)."""
    emulation_profile: str | None = None
    """The guard profile that emulates this server on stock PostgreSQL, if any."""
    detects: Callable[[ServerInfo], bool] | None = None
    """Is this the engine's server? None: its server cannot be told apart."""

    @property
    def capabilities(self) -> Capabilities:
        """The declared capabilities: every gap off, every behaviour on."""
        flags = {name: False for name in self.gaps} | {name: True for name in self.behaviours}
        return Capabilities(**flags)

    def capabilities_on(self, server: ServerInfo | None) -> Capabilities:
        """The capabilities on ``server``: a gap that does not apply to it is turned back on
        (None, when the server is unknown or emulated: every gap applies)."""
        if server is None:
            return self.capabilities
        closed = {name: True for name, gap in self.gaps.items() if not gap.applies(server)}
        return attrs.evolve(self.capabilities, **closed)

    def explain(self, capability: str) -> str:
        """Why this engine lacks (or, for a behaviour, needs) ``capability``."""
        if capability in self.gaps:
            return self.gaps[capability].explain()
        return self.behaviours.get(capability, "declared by the engine's description")

    def derive(self, **changes: object) -> EngineDescription:
        """A copy with ``changes`` (a plug-in engine built on this one)."""
        return attrs.evolve(self, **changes)  # type: ignore[arg-type]
