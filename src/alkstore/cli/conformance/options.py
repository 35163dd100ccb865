"""The options of ``alkstore conformance``: their names and values, checked before anything runs."""

from __future__ import annotations

import argparse
import importlib.util

from ...conformance.harness import (
    MEMORY_ENGINE,
    MEMORY_VARIANTS,
    driver_variants,
    installed_variants,
)
from ...drivers import not_installed

AUTO = "auto"
"""``--engine`` value that detects the engine from the server (as ``connect(engine="auto")``)."""
SUITE = "alkstore.conformance.suite"
"""The package holding the shared suite."""

PLUGINS = ("alkstore.conformance.plugin", "alkstore.conformance.matrix")
"""pytest plugins the run loads by module name."""

SUITE_NEEDS = ("pytest", "hypothesis")
"""Modules the suite imports, all brought by alkstore's ``conformance`` extra."""

CONFORMANCE_INSTALL = 'pip install "alkstore[conformance]"'
"""The command that installs what the suite needs."""

TEST_TIMEOUT = 300
"""Seconds one test may take when pytest-timeout is installed."""

EXIT_STATUSES = """\
exit status:
  0  every selected test passed or was skipped
  1  a test failed (or a suite module failed to import)
  2  the suite could not run to its end: bad arguments, unreachable database, pytest error
  5  no test was selected (check -k)
"""
"""The exit statuses, as ``--help`` lists them."""


def _engines() -> list[str]:
    from ...engines import available

    return available()


def parse_drivers(text: str, engine: str = "postgres") -> list[str]:
    """The drivers ``--driver`` names: ``all`` (the installed ones), one name, or a comma list.
    The in-memory engine has drivers of its own: its sync and async face."""
    known = list(MEMORY_VARIANTS) if engine == MEMORY_ENGINE else driver_variants()
    if text.strip() == "all":
        return known if engine == MEMORY_ENGINE else installed_variants()
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        wrong = ", ".join(unknown) or repr(text)
        raise ValueError(f"unknown driver {wrong}; choose from {', '.join(known)} or all")
    return names


def argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments before anything runs; None when they are usable."""
    lacking = [name for name in SUITE_NEEDS if importlib.util.find_spec(name) is None]
    if lacking:
        return f"the conformance suite needs {', '.join(lacking)}: {CONFORMANCE_INSTALL}"
    try:
        drivers = parse_drivers(args.driver, args.engine)
    except ValueError as exc:
        return f"--driver: {exc}"
    if not drivers:
        return f"--driver all: no driver is installed: {'; '.join(not_installed().values())}"
    missing = not_installed()
    asked = [name for name in drivers if name in missing]
    if asked:
        return "--driver: not installed: " + "; ".join(f"{n} ({missing[n]})" for n in asked)
    if args.pg_version is not None and args.dsn:
        return "--pg-version picks the throwaway cluster's version: not with --dsn"
    engines = _engines()
    if args.engine == AUTO:
        if args.emulate:
            return "--emulate needs an explicit --engine (auto detects the real server)"
        return None
    if args.engine not in engines:
        return f"--engine: unknown engine {args.engine!r}; known engines: {', '.join(engines)}"
    if args.engine == MEMORY_ENGINE and (args.dsn or args.pg_version or args.pgbouncer):
        return "--engine memory reaches no database: no --dsn, --pg-version or --pgbouncer"
    if args.emulate:
        from ...engines import engine_class

        try:
            profile = engine_class(args.engine).description.emulation_profile
        except Exception as exc:
            return f"--engine {args.engine}: cannot load it: {exc}"
        if profile is None:
            return f"--emulate: engine {args.engine!r} has no emulated mode"
    return None
