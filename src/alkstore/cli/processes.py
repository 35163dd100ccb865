"""``alkstore workers``: the processes running workers on a store, as their supervisors
recorded themselves (``Store.worker_processes``, docs/cli.md). Read-only; it never creates
or migrates a schema (see :mod:`.common`).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from .common import add_store_arguments, console, emit_json, jsonable, open_store, when


def register(subparsers: Any) -> None:
    """Add the ``workers`` subcommand."""
    workers = subparsers.add_parser(
        "workers", help="the processes running workers, from their supervisors' records"
    )
    add_store_arguments(workers, json_help="print the processes as a JSON list")
    workers.set_defaults(handler=_workers)


def _workers(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        listed = store.worker_processes()
    if args.json:
        emit_json(jsonable(listed))
        return 0
    table = Table("host", "pid", "queues", "workers", "started", "last seen", "maintenance")
    for p in listed:
        ran = "ran the last pass" if p.ran_last_pass else ""
        row = (p.host, str(p.pid), ",".join(p.queues), str(p.workers))
        table.add_row(*row, when(p.started_on), when(p.seen_on), ran)
    console().print(table)
    if not listed:
        console().print("no process runs workers with a supervisor on this schema")
    return 0
