"""The ``alkstore`` command: demo, conformance, bench, migrate, queues, worker.

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``handler`` (a function taking the parsed arguments and returning the
exit status).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SUBCOMMANDS = ("demo", "conformance", "bench", "admin", "worker")
"""Modules of this package that register subcommands."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="alkstore", description="alkstore: a job-queue storage engine for PostgreSQL"
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``alkstore`` console script."""
    args = build_parser().parse_args(argv)
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
