"""``alkstore conformance``: run the shared conformance suite against one backend, as a matrix.

The suite runs in a pytest subprocess, in an empty temporary directory with an empty pytest
configuration: a crashing driver or a hung test cannot take this process with it, and the
pytest settings and ``conftest.py`` files of the directory you run it from do not apply. The
subprocess loads the opt-in conformance plugin (:mod:`alkstore.conformance.plugin`) and the
matrix recorder (:mod:`alkstore.conformance.matrix`), whose JSON lines drive a progress bar
while the suite runs and the matrix afterwards. The DSN reaches the subprocess through
``ALKSTORE_DSN`` in its environment, never on a command line others can read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ...conformance.harness import driver_variants
from ...conformance.matrix import build_matrix, exit_status, render
from .options import AUTO, EXIT_STATUSES, _engines, argument_problem, parse_drivers
from .report import _drivers_not_installed, _explain, _title, report_json
from .server import probe, redact, unreachable
from .suite import SuiteRun, pytest_command, pytest_environment, run_suite


def register(subparsers: Any) -> None:
    """Add the ``conformance`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "conformance",
        help="run the shared conformance suite against a backend",
        description=(
            "Run alkstore's conformance suite against one database and engine, once per\n"
            "driver, and print the outcomes as a matrix of areas by drivers, with every\n"
            "skip's capability and reason and every failure's message."
        ),
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dsn",
        default=None,
        help="postgresql://… of the database to test (default: a throwaway PostgreSQL "
        "cluster started for the run; each test uses a fresh schema and drops it)",
    )
    parser.add_argument(
        "--engine",
        default="postgres",
        help=f"engine name (default postgres), or {AUTO!r} to detect it from the server "
        f"(never the sharded Citus mode); one of: {', '.join(_engines())}",
    )
    parser.add_argument(
        "--driver",
        default="all",
        help=f"{', '.join(driver_variants())}, a comma list of them, or all (the default)",
    )
    parser.add_argument(
        "--emulate",
        action="store_true",
        help="run a distributed engine on stock PostgreSQL behind its emulation guard",
    )
    parser.add_argument(
        "--pg-version",
        type=int,
        metavar="MAJOR",
        help="PostgreSQL major version of the throwaway cluster, 14 to 18 (default: the "
        "system's; others are installed into ~/.cache/alkstore once)",
    )
    parser.add_argument(
        "--pgbouncer",
        action="store_true",
        help="go through PgBouncer in transaction pooling mode: one is started in front of "
        "the throwaway cluster, or --dsn names one; stores connect with pooler='pgbouncer'",
    )
    parser.add_argument(
        "--json", metavar="FILE", type=Path, help="also write the matrix to FILE as JSON"
    )
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="select tests as pytest -k does")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show pytest's own output as it runs"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Handler of ``alkstore conformance``: run the suite, print the matrix, return the status."""
    console = Console()
    problem = argument_problem(args)
    detected = "postgres"  # what the throwaway cluster is, when no DSN is given
    if problem is None and args.dsn:
        reason, detected_here = probe(args.dsn)
        detected = detected_here or detected
        if reason is not None:
            problem = f"cannot reach the database at {redact(args.dsn)}: {reason}"
    if problem is None and args.engine == AUTO:
        args.engine = detected
        console.print(
            f"engine auto: the server looks like [bold]{detected}[/bold]"
            + (
                " (auto never picks the sharded mode: pass --engine citus-distributed for it)"
                if detected == "citus"
                else ""
            ),
            highlight=False,
        )
    if problem is not None:
        console.print(f"[red]alkstore conformance: {escape(problem)}[/red]", highlight=False)
        return 2
    try:
        suite = run_suite(args, console)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]")
        return 130
    matrix = build_matrix(suite.records.outcomes, parse_drivers(args.driver, args.engine))
    status = exit_status(matrix, suite.status)
    render(matrix, console, _title(args))
    console.print(f"in {suite.seconds:.1f} s")
    skipped = _drivers_not_installed(args)
    if skipped:
        console.print(f"drivers skipped, not installed ({len(skipped)}):", highlight=False)
        for name, install in skipped.items():
            console.print(f"  {name}: {install}", markup=False, highlight=False)
    _explain(status, suite, args, console)
    if args.json is not None:
        document = report_json(args, matrix, suite, status)
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return status


__all__ = [
    "EXIT_STATUSES",
    "SuiteRun",
    "argument_problem",
    "parse_drivers",
    "probe",
    "pytest_command",
    "pytest_environment",
    "redact",
    "register",
    "report_json",
    "run",
    "run_suite",
    "unreachable",
]
