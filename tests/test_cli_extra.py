"""rich is the ``alkstore`` command's, not the library's: ``pip install alkstore[psycopg]``
in a service brings no terminal-UI library, and the command without rich says what to
install."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

from alkstore.cli import CLI_INSTALL, main

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
TERMINAL_UI = {"rich", "textual", "click", "typer", "tqdm", "colorama", "prompt-toolkit"}
"""Libraries that draw on a terminal."""
COMMAND_ONLY = ("alkstore.cli", "alkstore.bench", "alkstore.conformance")
"""The packages of the ``alkstore`` command and the conformance plugin: their extras bring
rich (``cli``, which ``conformance``, ``all`` and ``dashboard`` include)."""


def requirements(*extras: str) -> set[str]:
    """The distribution names ``pip install "alkstore[extras]"`` asks for directly, the
    extras' references to alkstore's own extras followed."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    found: set[str] = set()
    pending, seen = list(extras), set()
    lines = list(project["dependencies"])
    while pending:
        extra = pending.pop()
        if extra not in seen:
            seen.add(extra)
            lines += project["optional-dependencies"][extra]
    for line in lines:
        match = re.match(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", line)
        assert match is not None, line
        name, nested = match.groups()
        if name == "alkstore":
            found |= requirements(*nested.split(","))
        else:
            found.add(name.lower().replace("_", "-"))
    return found


@pytest.mark.parametrize("extras", [(), ("psycopg",), ("asyncpg",), ("pg8000",), ("otel",)])
def test_the_library_extras_bring_no_terminal_ui(extras: tuple[str, ...]) -> None:
    assert requirements(*extras) & TERMINAL_UI == set()
    assert {"attrs", "cronsim"} <= requirements(*extras)


@pytest.mark.parametrize("extra", ["cli", "all", "conformance", "dashboard", "dev"])
def test_the_command_extras_bring_rich(extra: str) -> None:
    assert "rich" in requirements(extra)


def test_only_the_command_imports_rich() -> None:
    graph = grimp.build_graph("alkstore", include_external_packages=True, cache_dir=None)
    importers = graph.find_modules_that_directly_import("rich")
    assert importers, "the command's tables are drawn with rich"
    assert sorted(m for m in importers if not m.startswith(COMMAND_ONLY)) == []


def test_the_command_without_rich_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    assert main(["queues"]) == 2
    assert CLI_INSTALL in capsys.readouterr().err
