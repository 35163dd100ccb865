"""``alkstore create-queue`` and ``update-queue``: a queue's options from the shell.

Each option is ``--set NAME=VALUE`` with ``NAME`` a ``create_queue`` keyword (docs/queues.md)
and ``VALUE`` read as JSON when it is JSON (``3``, ``true``, ``null``) and as text otherwise
(``dead_letter=email.dead``). The store checks them: a bad one is refused by name and nothing
is written. Neither command creates or migrates a schema (see :mod:`.common`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from alkstore.core.records import Queue

from .common import CliError, add_store_arguments, console, emit_json, jsonable, open_store


def register(subparsers: Any) -> None:
    """Add the ``create-queue`` and ``update-queue`` subcommands."""
    for verb, text in (("create", "create a queue"), ("update", "change a queue's options")):
        parser = subparsers.add_parser(f"{verb}-queue", help=text)
        parser.add_argument("name")
        parser.add_argument(
            "--set",
            dest="options",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="an option, e.g. retry_limit=3 or dead_letter=email.dead (repeat for several)",
        )
        add_store_arguments(parser, json_help="print the queue as a JSON object")
        parser.set_defaults(handler=_create if verb == "create" else _update)


def options(pairs: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs as keyword options (values read as JSON when they are JSON)."""
    parsed: dict[str, Any] = {}
    for pair in pairs:
        name, equals, text = pair.partition("=")
        if not equals or not name:
            raise CliError(f"--set {pair!r}: expected NAME=VALUE")
        try:
            parsed[name] = json.loads(text)
        except ValueError:
            parsed[name] = text
    return parsed


def _create(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        store.create_queue(args.name, **options(args.options))
        queue = store.get_queue(args.name)
    return _print(args, queue, "created")


def _update(args: argparse.Namespace) -> int:
    given = options(args.options)
    if not given:  # nothing to change is a mistake, not a success
        raise CliError("nothing to update: give at least one --set NAME=VALUE")
    with open_store(args) as store:
        queue = store.update_queue(args.name, **given)
    return _print(args, queue, "updated")


def _print(args: argparse.Namespace, queue: Queue | None, done: str) -> int:
    assert queue is not None  # read back in the command's own connection
    document = jsonable(queue)
    if args.json:
        emit_json(document)
    else:
        settings = " ".join(f"{k}={json.dumps(v)}" for k, v in document["options"].items())
        console().print(f"{done} queue {queue.name!r}: {settings}", markup=False)
    return 0
