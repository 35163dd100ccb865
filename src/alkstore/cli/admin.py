"""``alkstore queues``, ``queue NAME`` and ``stats`` (read-only views of a store's queues),
``pause-queue`` and ``resume-queue``.

None of them creates or migrates a schema (see :mod:`.common`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.table import Table

import alkstore

from .common import (
    CliError,
    add_store_arguments,
    console,
    emit_json,
    open_store,
    queue_json,
    stats_json,
)


def register(subparsers: Any) -> None:
    """Add the ``queues``, ``queue`` and ``stats`` subcommands."""
    queues = subparsers.add_parser("queues", help="list the queues with their job counts")
    add_store_arguments(queues, json_help="print the queues as a JSON list")
    queues.set_defaults(handler=_queues)

    queue = subparsers.add_parser("queue", help="show one queue: its settings and job counts")
    queue.add_argument("name")
    add_store_arguments(queue, json_help="print the queue as a JSON object")
    queue.set_defaults(handler=_queue)

    stats = subparsers.add_parser(
        "stats", help="job counts per state and the oldest queued job's wait, per queue"
    )
    stats.add_argument("names", nargs="*", metavar="QUEUE", help="these queues (default: all)")
    add_store_arguments(stats, json_help="print the statistics as a JSON list")
    stats.set_defaults(handler=_stats)

    for verb, text in (("pause", "stop fetch handing out"), ("resume", "let fetch hand out")):
        parser = subparsers.add_parser(f"{verb}-queue", help=f"{text} a queue's jobs")
        parser.add_argument("name")
        add_store_arguments(parser, json_help='print {"queue", "paused"}')
        parser.set_defaults(handler=_pauser(verb == "pause"))


def _queues(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        listed = [(queue, store.queue_stats(queue.name)) for queue in store.queues()]
    if args.json:
        emit_json([queue_json(queue, stats) for queue, stats in listed])
        return 0
    table = Table("queue", "policy", "dead letter", *alkstore.JobState)
    for queue, stats in listed:
        counts = [str(stats.counts[state]) for state in alkstore.JobState]
        table.add_row(queue.name, str(queue.policy), queue.dead_letter or "", *counts)
    console().print(table)
    return 0


def _queue(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        queue = store.get_queue(args.name)
        if queue is None:
            raise CliError(f"no queue {args.name!r} in schema {args.schema!r}")
        stats = store.queue_stats(queue.name)
    document = queue_json(queue, stats)
    if args.json:
        emit_json(document)
        return 0
    table = Table("setting", "value", title=f"queue {queue.name}")
    for name, value in document["options"].items():
        table.add_row(name, "" if value is None else str(value))
    table.add_row("created_on", document["created_on"])
    table.add_row("updated_on", document["updated_on"])
    for state, count in document["counts"].items():
        table.add_row(f"jobs {state}", str(count))
    console().print(table)
    return 0


def _stats(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        names = args.names or [queue.name for queue in store.queues()]
        listed = [store.queue_stats(name) for name in names]  # QueueNotFound names a typo
    if args.json:
        emit_json([stats_json(stats) for stats in listed])
        return 0
    table = Table("queue", "queued", "active", "total", "oldest queued wait (s)")
    for stats in listed:
        age = stats.oldest_queued_age
        wait = "" if age is None else f"{age.total_seconds():.1f}"
        active = stats.counts[alkstore.JobState.ACTIVE]
        table.add_row(stats.queue, str(stats.queued), str(active), str(stats.total), wait)
    console().print(table)
    return 0


def _pauser(pause: bool) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        with open_store(args) as store:  # an unknown queue raises QueueNotFound
            (store.pause_queue if pause else store.resume_queue)(args.name)
        if args.json:
            emit_json({"queue": args.name, "paused": pause})
        else:
            console().print(f"queue {args.name!r} is {'paused' if pause else 'running'}")
        return 0

    return handler
