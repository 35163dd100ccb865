"""What ``alkstore conformance`` reports after a run: the matrix's title, the ``--json``
document, and why a run that failed no test still failed."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from ...conformance.harness import (
    MEMORY_ENGINE,
)
from ...conformance.matrix import (
    Matrix,
)
from ...drivers import not_installed
from .options import (
    parse_drivers,
)
from .server import (
    redact,
)
from .suite import (
    SuiteRun,
)


def _title(args: argparse.Namespace) -> str:
    mode = " (emulated)" if args.emulate else ""
    version = f" {args.pg_version}" if args.pg_version is not None else ""
    where = redact(args.dsn) if args.dsn else f"a throwaway PostgreSQL{version}"
    if args.engine == MEMORY_ENGINE:
        where = "this process (no database)"
    pooler = " through PgBouncer (transaction pooling)" if args.pgbouncer else ""
    return f"alkstore conformance: engine {args.engine}{mode} on {where}{pooler}"


def _drivers_not_installed(args: argparse.Namespace) -> dict[str, str]:
    """The drivers ``--driver all`` left out, each with the command that installs it."""
    if args.engine == MEMORY_ENGINE or args.driver.strip() != "all":
        return {}
    return not_installed()


def report_json(args: argparse.Namespace, matrix: Matrix, run: SuiteRun, status: int) -> Any:
    """The JSON document ``--json`` writes: the run's settings, the matrix and the status."""
    return {
        "engine": args.engine,
        "emulate": bool(args.emulate),
        "drivers": parse_drivers(args.driver, args.engine),
        "drivers_not_installed": _drivers_not_installed(args),
        "dsn": redact(args.dsn) if args.dsn else None,
        "pg_version": args.pg_version,
        "pgbouncer": bool(args.pgbouncer),
        "keyword": args.keyword,
        "exit_status": status,
        "pytest_exit_status": run.status,
        "seconds": round(run.seconds, 3),
        **matrix.to_json(),
    }


def _explain(status: int, run: SuiteRun, args: argparse.Namespace, console: Console) -> None:
    """Say why a run that did not fail a test still did not succeed."""
    if status == 5:
        selection = f" matching -k {args.keyword!r}" if args.keyword else ""
        console.print(f"[red]no tests collected{selection}[/red]")
    elif status == 2 or (status != 0 and run.records.collected is None):
        console.print(
            f"[red]the suite did not run to its end (pytest exit status {run.status})[/red]"
        )
        tail = run.output.strip().splitlines()[-25:]
        if tail:
            console.print("\n".join(tail), markup=False, highlight=False)
