"""``alkstore purge QUEUE --state S[,S…]``: delete a queue's jobs by state (docs/cli.md).

A careful tool: the states are always named (no default, no "all"), ``active`` included
only when named; it counts what it would delete and asks on a terminal, and refuses
without ``--yes`` when stdin is not one (a script says so explicitly). It never creates or
migrates a schema (see :mod:`.common`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import alkstore

from .common import CliError, add_store_arguments, console, emit_json, open_store


def register(subparsers: Any) -> None:
    """Add the ``purge`` subcommand."""
    purge = subparsers.add_parser("purge", help="delete a queue's jobs in the given states")
    purge.add_argument("queue")
    purge.add_argument(
        "--state",
        action="append",
        required=True,
        metavar="STATE[,STATE…]",
        help=f"delete jobs in these states (of {', '.join(alkstore.JobState)}; repeatable)",
    )
    purge.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    purge.add_argument(
        "--batch-size", type=int, default=10_000, help="rows per statement (default 10000)"
    )
    add_store_arguments(purge, json_help='print {"queue", "states", "deleted"}')
    purge.set_defaults(handler=_purge)


def _states(given: list[str]) -> list[alkstore.JobState]:
    names = [name.strip() for text in given for name in text.split(",") if name.strip()]
    try:
        return sorted({alkstore.JobState(name) for name in names})
    except ValueError:
        bad = next(n for n in names if n not in set(alkstore.JobState))
        raise CliError(f"--state {bad!r}: job states are {', '.join(alkstore.JobState)}") from None


def _purge(args: argparse.Namespace) -> int:
    states = _states(args.state)
    if args.batch_size < 1:  # before the prompt, and even when nothing matches
        raise CliError(f"--batch-size {args.batch_size}: must be at least 1")
    listed = ",".join(states)
    with open_store(args) as store:
        counts = store.queue_stats(args.queue).counts  # an unknown queue: QueueNotFound
        doomed = {state: counts[state] for state in states if counts[state]}
        if doomed and not args.yes:
            _confirm(args.queue, doomed)
        deleted = store.purge_jobs(args.queue, states, batch_size=args.batch_size) if doomed else 0
    if args.json:
        emit_json({"queue": args.queue, "states": [str(s) for s in states], "deleted": deleted})
    else:
        console().print(f"deleted {deleted} jobs of queue {args.queue!r} in states {listed}")
    return 0


def _confirm(queue: str, doomed: dict[alkstore.JobState, int]) -> None:
    total = sum(doomed.values())
    detail = ", ".join(f"{count} {state}" for state, count in doomed.items())
    if not sys.stdin.isatty():
        raise CliError(
            f"refusing to delete {total} jobs of queue {queue!r} ({detail}) without --yes:"
            " stdin is not a terminal to confirm on"
        )
    if alkstore.JobState.ACTIVE in doomed:
        print("active jobs are being worked on: their workers' settles will find nothing")
    answer = input(f"delete {total} jobs of queue {queue!r} ({detail})? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise CliError("nothing deleted")
