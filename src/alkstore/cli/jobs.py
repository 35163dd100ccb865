"""``alkstore jobs``, ``job``, ``retry``, ``cancel``, ``resume``, ``delete`` and ``redrive``.

``jobs`` and ``job`` only read. The others change jobs through the store's own operations
(the state each accepts is the store's rule: ``retry`` takes failed jobs, ``resume``
cancelled ones) and say how many of the given jobs changed. None creates or migrates a
schema (see :mod:`.common`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from rich.markup import escape
from rich.table import Table

import alkstore

from .common import (
    CliError,
    add_store_arguments,
    brief,
    console,
    emit_json,
    job_json,
    open_store,
    when,
)

CHANGES: dict[str, tuple[str, str, Callable[[alkstore.Store, str, list[str]], int]]] = {
    "retry": ("give failed jobs one more attempt", "retried", alkstore.Store.retry),
    "cancel": ("cancel queued or active jobs", "cancelled", alkstore.Store.cancel),
    "resume": ("resume cancelled jobs", "resumed", alkstore.Store.resume),
    "delete": ("delete jobs, in any state", "deleted", alkstore.Store.delete_jobs),
}
"""Subcommand -> (help, past tense, the store method)."""


def register(subparsers: Any) -> None:
    """Add the job subcommands."""
    jobs = subparsers.add_parser("jobs", help="list a queue's jobs, in id (≈ send) order")
    jobs.add_argument("queue")
    jobs.add_argument(
        "--state",
        action="append",
        default=[],
        choices=[str(state) for state in alkstore.JobState],
        help="only jobs in this state (repeat for several)",
    )
    jobs.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    jobs.add_argument("--after", default=None, help="the page after this job id")
    add_store_arguments(jobs, json_help='print {"jobs": [...], "next_after": id or null}')
    jobs.set_defaults(handler=_jobs)

    job = subparsers.add_parser("job", help="show one job")
    job.add_argument("queue")
    job.add_argument("id")
    add_store_arguments(job, json_help="print the job as a JSON object")
    job.set_defaults(handler=_job)

    for name, (text, done, method) in CHANGES.items():
        parser = subparsers.add_parser(name, help=text)
        parser.add_argument("queue")
        parser.add_argument("ids", nargs="+", metavar="ID")
        add_store_arguments(parser, json_help=f'print {{"queue", "requested", "{done}"}}')
        parser.set_defaults(handler=_changer(done, method))

    redrive = subparsers.add_parser(
        "redrive", help="move a dead-letter queue's queued jobs back to their source queue"
    )
    redrive.add_argument("dlq", metavar="DEAD_LETTER_QUEUE")
    redrive.add_argument("--to", default=None, help="to this queue instead of each job's source")
    redrive.add_argument("--limit", type=int, default=1000, help="at most this many (default 1000)")
    add_store_arguments(redrive, json_help='print {"queue", "redriven"}')
    redrive.set_defaults(handler=_redrive)


def _jobs(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        page = store.list_jobs(args.queue, states=args.state, limit=args.limit, after=args.after)
    next_after = str(page[-1].id) if len(page) == args.limit else None
    if args.json:
        emit_json(
            {"queue": args.queue, "jobs": [job_json(j) for j in page], "next_after": next_after}
        )
        return 0
    table = Table()
    table.add_column("id", no_wrap=True, min_width=36)  # whole: retry, cancel… take it
    for column in ("state", "priority", "attempt", "created", "start after", "data"):
        table.add_column(column)
    for job in page:
        attempt = f"{job.retry_count + 1}/{job.retry_limit + 1}"
        row = (str(job.id), str(job.state), str(job.priority), attempt)
        table.add_row(*row, when(job.created_on), when(job.start_after), brief(job.data))
    out = console()
    out.print(table)
    if next_after is not None:
        out.print(f"more: --after {next_after}")
    return 0


def _job(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        job = store.get_job(args.queue, args.id)
    if job is None:
        raise CliError(f"no job {args.id} in queue {args.queue!r}")
    document = job_json(job)
    if args.json:
        emit_json(document)
        return 0
    table = Table("field", "value", title=f"job {job.id}")
    for name, value in document.items():
        if name != "errors":
            table.add_row(name, "" if value is None else brief(value, 200))
    out = console()
    out.print(table)
    if job.errors:
        out.print(_attempt_history(job.errors))
    return 0


def _attempt_history(errors: tuple[alkstore.FailedAttempt, ...]) -> Table:
    """The failed attempts, oldest first (the stacks are in ``--json``)."""
    table = Table("attempt", "failed at", "error", "message", title="attempt history")
    for error in errors:
        message = "" if error.message is None else escape(error.message[:200])
        table.add_row(str(error.attempt), when(error.at), escape(error.name or ""), message)
    return table


def _changer(
    done: str, method: Callable[[alkstore.Store, str, list[str]], int]
) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        with open_store(args) as store:
            changed = method(store, args.queue, args.ids)
        if args.json:
            emit_json({"queue": args.queue, "requested": len(args.ids), done: changed})
        else:
            console().print(f"{done} {changed} of {len(args.ids)} jobs in queue {args.queue!r}")
        return 0

    return handler


def _redrive(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        moved = store.redrive(args.dlq, to=args.to, limit=args.limit)
        if moved == 0:
            _refuse_a_queue_that_is_no_dead_letter_queue(store, args.dlq)
    if args.json:
        emit_json({"queue": args.dlq, "redriven": moved})
    else:
        console().print(f"redrove {moved} jobs from {args.dlq!r}")
    return 0


def _refuse_a_queue_that_is_no_dead_letter_queue(store: alkstore.Store, name: str) -> None:
    """Raise :class:`CliError` when ``name`` is no queue's dead-letter queue: then a redrive
    that moved nothing most likely named the source queue. (A queue that holds copies through
    a job's own ``dead_letter`` moves them, so it never gets here.)"""
    queues = store.queues()
    if any(queue.dead_letter == name for queue in queues):
        return
    own = next((q.dead_letter for q in queues if q.name == name and q.dead_letter), None)
    hint = f" (did you mean {own!r}?)" if own else ""
    raise CliError(f"queue {name!r} is no queue's dead-letter queue: nothing was redriven{hint}")
