"""What the admin subcommands share: where the store is, how it is opened, how results print.

Every admin command connects with ``migrate=False``: only ``alkstore migrate`` installs or
upgrades a schema, and a command pointed at a schema that is not installed says so in one
line instead of creating it. Results print as a rich table (plain text with whole values
when the output is not a terminal) or, with ``--json``, as one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import enum
import json
import os
import uuid
from typing import Any

import attrs
from rich.console import Console
from rich.markup import escape

import alkstore
from alkstore.core.records import Job, Queue, QueueStats

DSN_ENV = "ALKSTORE_DSN"
"""The environment variable ``--dsn`` defaults to."""


class CliError(Exception):
    """A failure the command explains in one line (no traceback, exit status 1)."""


def positive_int(text: str) -> int:
    """An argument that must be an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_connection_arguments(
    parser: argparse.ArgumentParser,
    *,
    drivers: tuple[str, ...] = ("psycopg", "pg8000"),
    dsn_help: str = "postgresql://… or pglite:///dir",
) -> None:
    """``--dsn`` (or ``$ALKSTORE_DSN``), ``--engine``, ``--driver`` (one of ``drivers``, the
    first by default) and ``--schema``."""
    parser.add_argument(
        "--dsn",
        default=os.environ.get(DSN_ENV),
        required=DSN_ENV not in os.environ,
        help=f"{dsn_help} (default: ${DSN_ENV})",
    )
    parser.add_argument("--engine", default=None, help="postgres (default), auto, cockroachdb, …")
    parser.add_argument("--driver", default=drivers[0], choices=drivers)
    parser.add_argument("--schema", default="alkstore")


def add_store_arguments(parser: argparse.ArgumentParser, *, json_help: str) -> None:
    """:func:`add_connection_arguments`, ``--json`` and ``--debug``."""
    add_connection_arguments(parser)
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the full traceback of an error",
    )


def open_store(args: argparse.Namespace) -> alkstore.Store:
    """The store of ``args``, never creating or migrating its schema: a schema that is not
    installed is a :class:`CliError`."""
    store = alkstore.connect(
        args.dsn, engine=args.engine, driver=args.driver, schema=args.schema, migrate=False
    )
    try:
        if store.schema_version() is None:
            raise CliError(
                f"schema {args.schema!r} is not installed in that database "
                "(alkstore migrate installs it)"
            )
    except BaseException:
        store.close()
        raise
    return store


def jsonable(value: Any) -> Any:
    """``value`` (records, enums, ids, times, durations, nested in lists and dicts) as
    plain JSON values."""
    if attrs.has(type(value)):
        return {f.name: jsonable(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return value


def queue_json(queue: Queue, stats: QueueStats) -> dict[str, Any]:
    """A queue with its counts, as the JSON of ``queues`` and ``queue``."""
    counts = stats_json(stats)
    del counts["queue"]  # the queue's "name" says it
    return {**jsonable(queue), **counts}


def stats_json(stats: QueueStats) -> dict[str, Any]:
    """A queue's counts, as the JSON of ``stats``."""
    return {
        "queue": stats.queue,
        "counts": jsonable(stats.counts),
        "queued": stats.queued,
        "total": stats.total,
        "oldest_queued_seconds": jsonable(stats.oldest_queued_age),
    }


def job_json(job: Job) -> dict[str, Any]:
    """A job as JSON."""
    result: dict[str, Any] = jsonable(job)
    return result


def emit_json(document: Any) -> None:
    """Print ``document`` as JSON on stdout."""
    print(json.dumps(document, indent=2, ensure_ascii=False))


PIPED_WIDTH = 1_000_000
"""The width of piped output: wide enough that no value is cut or wrapped."""


def console() -> Console:
    """The console results print on: a terminal's is as wide as the terminal; piped output is
    plain text (rich detects a terminal) with whole values, whatever ``COLUMNS`` says."""
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=PIPED_WIDTH)


def on_terminal() -> bool:
    """Whether results print on a terminal (else they are piped: nothing is cut)."""
    return Console().is_terminal


def when(value: dt.datetime | None) -> str:
    """A timestamp for a table cell (UTC, to the second)."""
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def brief(data: Any, width: int = 40) -> str:
    """A job's data for a table cell: compact JSON, cut at ``width`` characters on a terminal
    (whole when piped), with rich markup escaped (``[bold]`` in a job's data prints as it is)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    cut = len(text) > width and on_terminal()
    return escape(text[: width - 1] + "…" if cut else text)
