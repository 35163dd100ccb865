"""The capability matrix of the built-in engines, rendered from their own declarations.

``docs/engines.md`` embeds this table between two markers; a test fails when the page and
the engines drift apart. Regenerate with ``python -m alkstore.engines.capability_matrix``.
"""

from __future__ import annotations

from . import BUILTIN, engine_class

BEGIN = "<!-- capability-matrix:begin -->"
END = "<!-- capability-matrix:end -->"
YES = "\N{CHECK MARK}"
NO = "\N{EN DASH}"


def markdown() -> str:
    """A Markdown table: one row per capability, one column per built-in engine."""
    engines = [engine_class(name) for name in BUILTIN]
    names = engines[0].capabilities.names()
    lines = [
        "| capability | " + " | ".join(e.name for e in engines) + " |",
        "|---|" + "|".join(":-:" for _ in engines) + "|",
    ]
    for capability in names:
        marks = (YES if getattr(e.capabilities, capability) else NO for e in engines)
        lines.append(f"| `{capability}` | " + " | ".join(marks) + " |")
    return "\n".join(lines)


def embed(page: str) -> str:
    """``page`` with the text between the markers replaced by the current table."""
    head, rest = page.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{markdown()}\n{END}{tail}"


if __name__ == "__main__":
    print(markdown())
