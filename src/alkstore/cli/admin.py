"""``alkstore migrate`` and ``alkstore queues``: schema and queue administration."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

import alkstore


def register(subparsers: Any) -> None:
    """Add the ``migrate`` and ``queues`` subcommands."""
    for name, handler, text in (
        ("migrate", _migrate, "install or upgrade the schema"),
        ("queues", _queues, "list queues with their job counts"),
    ):
        parser: argparse.ArgumentParser = subparsers.add_parser(name, help=text)
        parser.add_argument("--dsn", required=True, help="postgresql://… or pglite:///dir")
        parser.add_argument("--engine", default=None)
        parser.add_argument("--driver", default="psycopg", choices=("psycopg", "pg8000"))
        parser.add_argument("--schema", default="alkstore")
        parser.set_defaults(handler=handler)


def _open(args: argparse.Namespace) -> alkstore.Store:
    return alkstore.connect(args.dsn, engine=args.engine, driver=args.driver, schema=args.schema)


def _migrate(args: argparse.Namespace) -> int:
    with _open(args) as store:
        Console().print(f"schema {args.schema!r} is at version {store.schema_version()}")
    return 0


def _queues(args: argparse.Namespace) -> int:
    table = Table("queue", "created", "retry", "active", "completed", "cancelled", "failed")
    with _open(args) as store:
        for queue in store.queues():
            counts = store.queue_stats(queue.name).counts
            table.add_row(queue.name, *(str(counts[state]) for state in alkstore.JobState))
    Console().print(table)
    return 0
