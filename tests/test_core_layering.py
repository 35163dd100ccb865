"""``alkstore.core`` is the bottom layer: it imports no other alkstore package, no database
driver and no I/O module. Checked on the source (AST), so a lazy import inside a function
counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import alkstore.core

CORE_DIR = Path(alkstore.core.__file__).resolve().parent
CORE_MODULES = sorted(CORE_DIR.glob("*.py"))

EXPECTED_MODULES = {
    "__init__",
    "capabilities",
    "contracts",
    "description",
    "errors",
    "identifiers",
    "ids",
    "options",
    "plans",
    "records",
    "retry",
    "schedules",
    "states",
    "targets",
    "validation",
}

FORBIDDEN_TOP_LEVEL = {
    # database drivers
    "psycopg",
    "psycopg2",
    "psycopg_pool",
    "asyncpg",
    "pg8000",
    "sqlite3",
    # I/O and processes
    "socket",
    "ssl",
    "select",
    "selectors",
    "subprocess",
    "asyncio",
    "http",
    "urllib",
    "multiprocessing",
    # would let a module dodge this check
    "importlib",
}


def imported_names(source: str, package: str = "alkstore.core") -> list[tuple[int, str]]:
    """Every module an import statement names, as absolute dotted names (line, name)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                assert node.module is not None
                found.append((node.lineno, node.module))
                continue
            parts = package.split(".")
            if node.level > len(parts):
                found.append((node.lineno, "<beyond the top package>"))
                continue
            base = ".".join(parts[: len(parts) - (node.level - 1)])
            if node.module:
                found.append((node.lineno, f"{base}.{node.module}"))
            else:
                found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def violations(source: str) -> list[str]:
    bad = []
    for line, name in imported_names(source):
        top = name.split(".")[0]
        if name.startswith("<"):
            bad.append(f"line {line}: relative import {name}")
        elif top == "alkstore" and not (
            name == "alkstore.core" or name.startswith("alkstore.core.")
        ):
            bad.append(f"line {line}: imports {name} (outside alkstore.core)")
        elif top in FORBIDDEN_TOP_LEVEL:
            bad.append(f"line {line}: imports {name}")
    return bad


def test_every_core_module_is_checked() -> None:
    assert {path.stem for path in CORE_MODULES} >= EXPECTED_MODULES
    assert CORE_DIR.parts[-2:] == ("alkstore", "core")


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda p: p.name)
def test_core_module_stays_in_its_layer(path: Path) -> None:
    assert violations(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "from .. import store",
        "from ..drivers import base",
        "from ..engines.postgres import engine",
        "from ... import anything",
        "import alkstore.runner",
        "from alkstore import store",
        "from alkstore.drivers.psycopg import Driver",
        "import psycopg",
        "import psycopg.rows",
        "from asyncpg import connect",
        "import pg8000.native",
        "import socket",
        "import subprocess as sp",
        "from subprocess import run",
        "def lazy():\n    import psycopg_pool\n",
        "import importlib",
    ],
)
def test_the_checker_catches_layer_violations(source: str) -> None:
    assert violations(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "from .errors import InvalidOptions",
        "from . import states",
        "from alkstore.core.states import JobState",
        "import alkstore.core.retry",
        "import json, uuid, datetime as dt",
        "import attrs",
        "from collections.abc import Mapping",
    ],
)
def test_the_checker_allows_core_and_stdlib_imports(source: str) -> None:
    assert violations(source) == []


def test_relative_imports_resolve_inside_core() -> None:
    assert imported_names("from .records import Job") == [(1, "alkstore.core.records")]
    assert imported_names("from .. import store") == [(1, "alkstore.store")]
