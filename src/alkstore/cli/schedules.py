"""``alkstore schedules``, ``unschedule``, ``pause-schedule``, ``resume-schedule`` and
``trigger-schedule``: the store's cron schedules (docs/cli.md).

None of them creates or migrates a schema (see :mod:`.common`).
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from rich.table import Table

from alkstore.core.schedules import Schedule

from .common import CliError, add_store_arguments, brief, console, emit_json, jsonable, open_store
from .common import when as timestamp


def register(subparsers: Any) -> None:
    """Add the ``schedules``, ``unschedule``, ``pause-schedule``, ``resume-schedule`` and
    ``trigger-schedule`` subcommands."""
    schedules = subparsers.add_parser(
        "schedules", help="list the schedules, their last slot and their next run"
    )
    add_store_arguments(schedules, json_help="print the schedules as a JSON list")
    schedules.set_defaults(handler=_schedules)

    for verb, text, json_help, handler in (
        ("unschedule", "remove a schedule", '{"queue", "key", "removed"}', _unschedule),
        ("pause-schedule", "stop a schedule firing", '{"queue", "key", "paused"}', _pause),
        ("resume-schedule", "let a schedule fire again", '{"queue", "key", "paused"}', _resume),
        ("trigger-schedule", "send a schedule's job now", '{"queue", "key", "id"}', _trigger),
    ):
        parser = subparsers.add_parser(verb, help=text)
        parser.add_argument("name", metavar="QUEUE")
        parser.add_argument("--key", default="", help="the schedule's key (default: none)")
        add_store_arguments(parser, json_help=f"print {json_help}")
        parser.set_defaults(handler=handler)


def schedule_json(schedule: Schedule, now: dt.datetime) -> dict[str, Any]:
    """A schedule as JSON, with its next run after ``now`` (None while paused)."""
    document: dict[str, Any] = jsonable(schedule)
    document["next_run"] = jsonable(schedule.next_slot(now))
    return document


def _schedules(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        listed = store.schedules()
    now = dt.datetime.now(dt.UTC)
    if args.json:
        emit_json([schedule_json(s, now) for s in listed])
        return 0
    table = Table("queue", "key", "cron", "tz", "missed", "last slot", "next run", "data")
    for s in listed:
        row = (s.name, s.key, s.cron, s.tz, str(s.missed), timestamp(s.last_slot))
        upcoming = "paused" if s.paused_on is not None else timestamp(s.next_slot(now))
        table.add_row(*row, upcoming, brief(s.data))
    console().print(table)
    return 0


def _named(args: argparse.Namespace) -> str:
    return f"the schedule of queue {args.name!r} with key {args.key!r}"


def _unschedule(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        removed = store.unschedule(args.name, args.key)
    if not removed:  # not a silent no-op: a typo in the name or key says so
        raise CliError(f"no schedule of queue {args.name!r} with key {args.key!r}")
    if args.json:
        emit_json({"queue": args.name, "key": args.key, "removed": True})
    else:
        console().print(f"removed {_named(args)}")
    return 0


def _pause(args: argparse.Namespace) -> int:
    with open_store(args) as store:  # a missing schedule raises ScheduleNotFound
        changed = store.pause_schedule(args.name, args.key)
    if args.json:
        emit_json({"queue": args.name, "key": args.key, "paused": True})
    else:
        console().print(f"{_named(args)} is {'now' if changed else 'already'} paused")
    return 0


def _resume(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        changed = store.resume_schedule(args.name, args.key)
    if args.json:
        emit_json({"queue": args.name, "key": args.key, "paused": False})
    else:
        state = "fires again from its next slot" if changed else "was not paused"
        console().print(f"{_named(args)} {state}")
    return 0


def _trigger(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        sent = store.trigger_schedule(args.name, args.key)
    if sent is None:  # refused, as a send would be: said, not a silent no-op
        raise CliError(f"the policy of queue {args.name!r} refused the job of {_named(args)}")
    if args.json:
        emit_json({"queue": args.name, "key": args.key, "id": str(sent)})
    else:
        console().print(f"sent job {sent} of {_named(args)}")
    return 0
