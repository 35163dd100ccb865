"""The ``alkstore`` command: demo, conformance, bench, worker, and the admin commands.

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``handler`` (a function taking the parsed arguments and returning the
exit status). An error a handler raises prints as one line on stderr (exit status 1); with
``--debug`` (before or after the subcommand) its traceback is shown instead. A closed
stdout (``alkstore queues | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from importlib.metadata import version

SUBCOMMANDS = (
    "demo",
    "conformance",
    "bench",
    "admin",
    "jobs",
    "purge",
    "queue_options",
    "schedules",
    "schema",
    "worker",
    "processes",
    "dashboard",
    "metrics",
)
"""Modules of this package that register subcommands."""

CLI_INSTALL = 'pip install "alkstore[cli]"'
"""The command that installs what the ``alkstore`` command needs beyond the library (rich,
for its tables and progress bars; the library itself never imports it)."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="alkstore", description="alkstore: a job-queue storage engine for PostgreSQL"
    )
    parser.add_argument("--version", action="version", version=f"alkstore {version('alkstore')}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``alkstore`` console script."""
    try:
        import rich  # noqa: F401
    except ImportError:
        print(f"the alkstore command needs rich: {CLI_INSTALL}", file=sys.stderr)
        return 2
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # refused by the subcommand's parser, so that its usage is the one shown
        innermost(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        status: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return closed_pipe()
    except Exception as exc:
        if args.debug:
            raise
        print(f"alkstore {args.command}: {one_line(exc)}", file=sys.stderr)
        return 1
    return status


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)subcommand ``args`` chose (``bench wal``'s for ``alkstore bench
    wal``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(str(getattr(args, action.dest, "")))
            if chosen is not None:
                return innermost(chosen, args)
    return parser


def closed_pipe() -> int:
    """The exit status of a command whose reader closed stdout (``alkstore queues | head``):
    1, without a message, as rich ends a table's print then. Stdout is pointed at /dev/null
    so that flushing it at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 1


def one_line(exc: BaseException) -> str:
    """An error as one line: alkstore's own errors by their message, others (a driver's
    connection error) prefixed with their type."""
    from ..core.errors import AlkstoreError, QueueNotFound
    from .common import CliError

    if isinstance(exc, QueueNotFound) and exc.field == "queue":
        return f"queue {exc.name!r} does not exist"  # not "queue: queue …"
    lines = str(exc).strip().splitlines()
    text = lines[0].strip() if lines else ""
    if isinstance(exc, AlkstoreError | CliError):
        return text or type(exc).__name__
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


if __name__ == "__main__":
    sys.exit(main())
