"""The emulation guard rules rendered for ``docs/engines.md`` (a test keeps the page in sync)."""

from __future__ import annotations

from .profiles import PROFILES, rules_for


def rules_markdown(profile_name: str) -> str:
    """The rules of ``profile_name`` as a markdown table: id, what it rejects, source."""
    lines = ["| Rule | Rejects | Capability | Source |", "| --- | --- | --- | --- |"]
    for rule in rules_for(profile_name):
        reason = rule.reason.replace("|", "\\|")
        capability = f"`{rule.capability}`" if rule.capability else "—"
        lines.append(f"| `{rule.id}` | {reason} | {capability} | <{rule.source}> |")
    return "\n".join(lines)


def rules_section() -> str:
    """The "Emulation guard rules" section of ``docs/engines.md``, every profile's table."""
    parts = [
        "## Emulation guard rules",
        "",
        "Generated from `alkstore.engines.emulation.profiles` (a test keeps it in sync). "
        "Each rule rejects, before it is sent, a statement the real server would reject; "
        "*Capability* names the flag the engine turns off because of the limitation.",
    ]
    for name in PROFILES:
        parts += ["", f"### {name}", "", rules_markdown(name)]
    return "\n".join(parts) + "\n"
