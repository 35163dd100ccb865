"""The capability matrix and the gap table of the built-in engines, from their descriptions.

``docs/engines.md`` embeds both between two markers; a test fails when the page and the
descriptions drift apart. Regenerate with ``python -m alkstore.engines.capability_matrix``.

A capability no code reads yet is marked "declared, not used yet": :data:`CONSULTED` lists
the ones the engine code branches on, and a test keeps it equal to what the source reads.
"""

from __future__ import annotations

from ..core.capabilities import Capabilities
from ..core.description import EngineDescription
from . import BUILTIN, engine_class

BEGIN = "<!-- capability-matrix:begin -->"
END = "<!-- capability-matrix:end -->"
YES = "\N{CHECK MARK}"
NO = "\N{EN DASH}"
NOT_USED = "declared, not used yet"

CONSULTED = frozenset(
    {
        "skip_locked",
        "multi_mutation_cte",
        "tuple_ids",
        "table_partitioning",
        "advisory_locks",
        "covering_indexes",
        "serialization_retries",
        "single_connection",
        "plpgsql",
        "listen_notify",
        "transactional_heartbeat",
        "asynchronous_commit",
        "row_triggers",
    }
)
"""Capabilities that some product code reads (``tests/test_capability_matrix.py`` checks this
against the source): the rest are declared but change nothing yet."""


def descriptions() -> list[EngineDescription]:
    """The built-in engines' descriptions, in registry order."""
    return [engine_class(name).description for name in BUILTIN]


def markdown() -> str:
    """The matrix (one row per capability, one column per built-in engine), then one row per
    gap: why, and the guard rules that enforce it or why none can exist."""
    engines = descriptions()
    lines = [
        "| capability | " + " | ".join(e.name for e in engines) + " |",
        "|---|" + "|".join(":-:" for _ in engines) + "|",
    ]
    for capability in Capabilities().names():
        label = f"`{capability}`"
        if capability not in CONSULTED:
            label += f" ({NOT_USED})"
        marks = (YES if getattr(e.capabilities, capability) else NO for e in engines)
        lines.append(f"| {label} | " + " | ".join(marks) + " |")
    lines += ["", "| engine | lacks | why | guard rules |", "|---|---|---|---|"]
    for engine in engines:
        for capability, gap in engine.gaps.items():
            rules = ", ".join(f"`{r}`" for r in gap.guard_rules) or f"none: {gap.no_rule_reason}"
            lines.append(f"| {engine.name} | `{capability}` | {gap.explain()} | {rules} |")
    return "\n".join(lines)


def embed(page: str) -> str:
    """``page`` with the text between the markers replaced by the current tables."""
    head, rest = page.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{markdown()}\n{END}{tail}"


if __name__ == "__main__":
    print(markdown())
