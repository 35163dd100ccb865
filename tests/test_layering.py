"""The import graph of ``src/alkstore``: engines below the faces, the runtime on the engine
contract, no import cycle.

The graph comes from grimp (the library under import-linter), which reads every import
statement of the source, a lazy one inside a function and a type-only one under
``TYPE_CHECKING`` included. The rules (``alkstore.core`` has its own, stricter check in
tests/test_core_layering.py):

- an engine (``alkstore.engines``) imports nothing of alkstore but ``alkstore.core`` and
  other engines: not the faces (``store``, ``worker``, ``tasks``, ``cli``, ...) and not the
  drivers; type-only imports count;
- a driver (``alkstore.drivers``) imports nothing of alkstore but ``alkstore.core`` and
  other drivers (a driver an engine ships, like the in-memory one, is named to the registry
  by its module path, never imported);
- the runtime (``alkstore.worker``, ``alkstore.messaging``, ``alkstore.waiting``,
  ``alkstore.tasks``) imports no engine package: it
  asks the engine contract (``alkstore.core.contracts``);
- no import cycle among alkstore's modules. A cycle that closes only through type-only
  imports runs no code at import time, so it cannot break an import order; the few that
  exist are listed in :data:`TYPE_ONLY_CYCLES`, each with why, and the test fails when one
  appears that is not listed, or when a listed one is gone (drop it from the list then).
"""

from __future__ import annotations

from collections.abc import Iterable

import grimp
import pytest

PACKAGE = "alkstore"
ENGINE_MAY_IMPORT = ("alkstore.core", "alkstore.engines")
DRIVER_MAY_IMPORT = ("alkstore.core", "alkstore.drivers")
DRIVERS = "alkstore.drivers"
RUNTIME = ("alkstore.worker", "alkstore.messaging", "alkstore.waiting", "alkstore.tasks")
ENGINES = "alkstore.engines"

TYPE_ONLY_CYCLES: dict[frozenset[str], str] = {
    frozenset(
        {
            "alkstore.core.errors",
            "alkstore.core.options",
            "alkstore.core.records",
            "alkstore.core.validation",
        }
    ): "an error names the Job it concerns (WaitTimeout.job) in its annotations, while the "
    "records validate their fields into those errors",
    frozenset(
        {
            "alkstore.worker.faces",
            "alkstore.worker.runtime",
            "alkstore.worker.tasks",
            "alkstore.worker.threads",
        }
    ): "the worker runtime and the workers it starts name each other's classes; the "
    "worker/store circle belongs to the tasks issue",
    frozenset({"alkstore.store", "alkstore.waiting"}): (
        "wait() is a method of both store faces, and its helpers take the store they wait on"
    ),
}


def _within(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _modules(graph: grimp.ImportGraph, package: str) -> list[str]:
    return sorted(m for m in graph.modules if _within(m, [package]))


def layer_violations(
    graph: grimp.ImportGraph, layer: str, may_import: Iterable[str] = ()
) -> list[str]:
    """Each import of a module of ``layer`` that reaches into alkstore outside
    ``may_import``."""
    allowed = tuple(may_import)
    return [
        f"{module} imports {imported}"
        for module in _modules(graph, layer)
        for imported in sorted(graph.find_modules_directly_imported_by(module))
        if _within(imported, [PACKAGE]) and not _within(imported, allowed)
    ]


def engine_violations(graph: grimp.ImportGraph) -> list[str]:
    """Each import of an engine module that reaches outside the core and the engines."""
    return layer_violations(graph, ENGINES, ENGINE_MAY_IMPORT)


def runtime_violations(graph: grimp.ImportGraph) -> list[str]:
    """Each import of a runtime module (worker, messaging, waiting, tasks) of a named engine package (the
    registry, ``alkstore.engines`` itself, is no engine)."""
    return [
        f"{module} imports {imported}"
        for package in RUNTIME
        for module in _modules(graph, package)
        for imported in sorted(graph.find_modules_directly_imported_by(module))
        if imported.startswith(ENGINES + ".")
    ]


def cycles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """Every import, type-only and lazy ones included."""
    return grimp.build_graph(PACKAGE, cache_dir=None)


@pytest.fixture(scope="module")
def runtime_graph() -> grimp.ImportGraph:
    """The imports that run: type-only ones left out."""
    return grimp.build_graph(PACKAGE, cache_dir=None, exclude_type_checking_imports=True)


def test_the_graph_is_the_whole_package(graph: grimp.ImportGraph) -> None:
    for module in (
        "alkstore.store",
        "alkstore.messaging",
        "alkstore.worker.runtime",
        "alkstore.engines.postgres.engine",
        "alkstore.engines.memory.driver",
        "alkstore.drivers.psycopg",
        "alkstore.cli.conformance.suite",
    ):
        assert module in graph.modules


def test_engines_import_only_the_core_and_engines(graph: grimp.ImportGraph) -> None:
    assert engine_violations(graph) == []


def test_drivers_import_only_the_core_and_drivers(graph: grimp.ImportGraph) -> None:
    assert layer_violations(graph, DRIVERS, DRIVER_MAY_IMPORT) == []


def test_the_checker_catches_a_driver_reaching_up_or_across() -> None:
    toy = _toy(
        ("alkstore.drivers.psycopg", "alkstore.core.plans"),
        ("alkstore.drivers.psycopg", "alkstore.drivers.base"),
        ("alkstore.drivers.psycopg", "alkstore.engines.memory.driver"),
        ("alkstore.drivers.base", "alkstore.store"),
    )
    assert layer_violations(toy, DRIVERS, DRIVER_MAY_IMPORT) == [
        "alkstore.drivers.base imports alkstore.store",
        "alkstore.drivers.psycopg imports alkstore.engines.memory.driver",
    ]


def test_the_runtime_imports_no_engine_package(graph: grimp.ImportGraph) -> None:
    assert runtime_violations(graph) == []


def test_no_import_cycle_runs(runtime_graph: grimp.ImportGraph) -> None:
    assert cycles(runtime_graph) == []


def test_the_type_only_cycles_are_the_listed_ones(graph: grimp.ImportGraph) -> None:
    assert sorted(map(sorted, cycles(graph))) == sorted(map(sorted, TYPE_ONLY_CYCLES))


def test_no_engine_is_in_a_cycle_even_through_type_only_imports(
    graph: grimp.ImportGraph,
) -> None:
    assert [c for c in cycles(graph) if any(_within(m, [ENGINES]) for m in c)] == []


def _toy(*imports: tuple[str, str]) -> grimp.ImportGraph:
    toy = grimp.ImportGraph()
    for importer, imported in imports:
        toy.add_import(importer=importer, imported=imported)
    return toy


@pytest.mark.parametrize(
    "imported",
    [
        "alkstore.store",
        "alkstore.worker.runtime",
        "alkstore.tasks",
        "alkstore.cli.common",
        "alkstore.messaging",
        "alkstore.drivers.base",
        "alkstore.runner",
    ],
)
def test_the_checker_catches_an_engine_reaching_up_or_across(imported: str) -> None:
    toy = _toy(("alkstore.engines.memory.driver", imported))
    assert engine_violations(toy) == [f"alkstore.engines.memory.driver imports {imported}"]


def test_the_checker_lets_engines_import_the_core_engines_and_libraries() -> None:
    toy = _toy(
        ("alkstore.engines.citus", "alkstore.engines.postgres.engine"),
        ("alkstore.engines.postgres.base", "alkstore.core.plans"),
        ("alkstore.engines.postgres.base", "attrs"),
    )
    assert engine_violations(toy) == []


def test_the_checker_catches_the_runtime_naming_an_engine() -> None:
    toy = _toy(
        ("alkstore.messaging", "alkstore.engines.postgres.schedules"),
        ("alkstore.worker.core", "alkstore.engines.memory"),
        ("alkstore.worker.core", "alkstore.core.contracts"),
        ("alkstore.worker.loop", "alkstore.engines"),
    )
    assert sorted(runtime_violations(toy)) == [
        "alkstore.messaging imports alkstore.engines.postgres.schedules",
        "alkstore.worker.core imports alkstore.engines.memory",
    ]


def test_the_checker_finds_every_cycle() -> None:
    toy = _toy(
        ("a.base", "a.hooks"),
        ("a.hooks", "a.runtime"),
        ("a.runtime", "a.base"),
        ("a.engine", "a.base"),
        ("b.one", "b.two"),
        ("b.two", "b.one"),
        ("c.leaf", "a.engine"),
    )
    assert sorted(map(sorted, cycles(toy))) == [
        ["a.base", "a.hooks", "a.runtime"],
        ["b.one", "b.two"],
    ]
