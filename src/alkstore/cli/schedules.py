"""``alkstore schedules`` and ``unschedule``: the store's cron schedules (docs/cli.md).

Neither creates or migrates a schema (see :mod:`.common`).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from .common import CliError, add_store_arguments, brief, console, emit_json, jsonable, open_store
from .common import when as timestamp


def register(subparsers: Any) -> None:
    """Add the ``schedules`` and ``unschedule`` subcommands."""
    schedules = subparsers.add_parser("schedules", help="list the schedules and their last slot")
    add_store_arguments(schedules, json_help="print the schedules as a JSON list")
    schedules.set_defaults(handler=_schedules)

    unschedule = subparsers.add_parser("unschedule", help="remove a schedule")
    unschedule.add_argument("name", metavar="QUEUE")
    unschedule.add_argument("--key", default="", help="the schedule's key (default: none)")
    add_store_arguments(unschedule, json_help='print {"queue", "key", "removed"}')
    unschedule.set_defaults(handler=_unschedule)


def _schedules(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        listed = store.schedules()
    if args.json:
        emit_json(jsonable(listed))
        return 0
    table = Table("queue", "key", "cron", "tz", "missed", "last slot", "data")
    for s in listed:
        row = (s.name, s.key, s.cron, s.tz, str(s.missed), timestamp(s.last_slot))
        table.add_row(*row, brief(s.data))
    console().print(table)
    return 0


def _unschedule(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        removed = store.unschedule(args.name, args.key)
    if not removed:  # not a silent no-op: a typo in the name or key says so
        raise CliError(f"no schedule of queue {args.name!r} with key {args.key!r}")
    if args.json:
        emit_json({"queue": args.name, "key": args.key, "removed": True})
    else:
        console().print(f"removed the schedule of queue {args.name!r} with key {args.key!r}")
    return 0
