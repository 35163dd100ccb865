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
        "advisory_locks": Deviation("one shared backend session; advisory locks never conflict"),
        "listen_notify": Deviation("a notification reaches only the connection that sent it"),
    },
}


def explain(engine: str, capability: str) -> str:
    """The registered reason for ``engine`` lacking ``capability``."""
    entry = REGISTRY.get(engine, {}).get(capability)
    if entry is None:
        return "declared by the engine's capability profile"
    return f"{entry.why} ({entry.upstream})" if entry.upstream else entry.why
