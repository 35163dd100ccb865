"""The worker package reaches the store and the engines through narrow typed interfaces
(``alkstore.worker.faces``, ``alkstore.core.contracts.WorkerRuntime``): it imports neither
``alkstore.store`` nor any engine, not even for type checking, so there is no import circle
between ``store.py`` and ``worker/``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import alkstore
from alkstore.core.contracts import worker_runtime
from alkstore.core.errors import UnsupportedByEngine

WORKER = Path(alkstore.__file__).parent / "worker"


def _imports(path: Path) -> set[str]:
    """The absolute modules ``path`` imports (relative imports resolved)."""
    package = "alkstore.worker"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("path", sorted(WORKER.glob("*.py")), ids=lambda p: p.name)
def test_the_worker_package_imports_neither_the_store_nor_an_engine(path: Path) -> None:
    forbidden = [
        name
        for name in _imports(path)
        if name == "alkstore.store" or name.startswith(("alkstore.store.", "alkstore.engines"))
    ]
    assert forbidden == []


def test_an_engine_without_a_worker_runtime_is_refused_by_name() -> None:
    class Bare:
        name = "bare"

    with pytest.raises(UnsupportedByEngine, match="'bare'"):
        worker_runtime(Bare())  # type: ignore[arg-type]
