"""``alkstore demo``: a short tour of the alkstore API that doubles as a throughput check.

It opens a store on a fresh schema, creates a queue that retries a job once and then moves
it to a dead-letter queue, sends the jobs in batches, and drains them with a few consumer
threads sharing the store (it is thread-safe). One job in :data:`FAIL_EVERY` always fails:
it is retried once, then lands in the dead-letter queue. A summary table follows, and the
schema is dropped. :func:`run_demo` reads top to bottom as an example of the API.

The default database is ``pglite://``: an in-memory embedded PostgreSQL (PGlite, served by a
Node.js child process) reached through one shared connection, which the consumers take turns
on. Any ``postgresql://`` DSN works too.
"""

from __future__ import annotations

import argparse
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import attrs
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import alkstore
from alkstore import Job, JobState

from .common import positive_int

QUEUE = "demo"
"""The queue the demo sends to and drains."""
DEAD_LETTERS = "demo.dead"
"""Where jobs go once their retries are used up."""
SEND_BATCH = 1_000
"""Jobs per ``send_many`` call."""
FAIL_EVERY = 100
"""Job ``n`` always fails when ``n % FAIL_EVERY == 0`` (1% of the jobs)."""


def register(subparsers: Any) -> None:
    """Add the ``demo`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="send and drain jobs on a throwaway queue, then print the throughput",
        description=(
            "Create a queue (retry once, then dead-letter) in a fresh schema, send jobs in "
            f"batches of {SEND_BATCH:,}, drain them with consumer threads (1 job in "
            f"{FAIL_EVERY} always fails), print a summary and drop the schema."
        ),
    )
    parser.add_argument(
        "--dsn",
        default="pglite://",
        help="postgresql://… or pglite:// (default: pglite://, in-memory embedded PostgreSQL)",
    )
    parser.add_argument(
        "--jobs", type=positive_int, default=10_000, help="jobs to send (default %(default)s)"
    )
    parser.add_argument(
        "--consumers", type=positive_int, default=4, help="consumer threads (default %(default)s)"
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=100,
        help="jobs per fetch (default %(default)s, the batch of the drain benchmarks)",
    )
    parser.add_argument(
        "--driver",
        default="psycopg",
        choices=("psycopg", "pg8000"),
        help="client library (default %(default)s)",
    )
    parser.set_defaults(handler=run)


@attrs.frozen
class DemoResult:
    """What a demo run measured."""

    jobs: int
    send_seconds: float
    drain_seconds: float
    wall_seconds: float
    counts: dict[JobState, int]
    """Jobs of the main queue per state after the drain."""
    retried: int
    """Jobs fetched again after a failure (``retry_count > 0``)."""
    dead_letters: int
    """Jobs waiting in the dead-letter queue."""

    @property
    def always_failing(self) -> int:
        """How many of the jobs were made to fail on every attempt."""
        return len(range(0, self.jobs, FAIL_EVERY))

    @property
    def consistent(self) -> bool:
        """Whether every job ended where the demo says it should."""
        failing = self.always_failing
        return (
            self.counts[JobState.COMPLETED] == self.jobs - failing
            and self.counts[JobState.FAILED] == failing
            and self.retried == failing
            and self.dead_letters == failing
        )


def run_demo(
    dsn: str, *, jobs: int, consumers: int, batch: int, driver: str, console: Console
) -> DemoResult:
    """Send ``jobs`` jobs, drain them with ``consumers`` threads, and measure it."""
    started = time.perf_counter()
    schema = f"demo_{secrets.token_hex(4)}"  # a fresh schema: repeated runs never collide
    with alkstore.connect(dsn, driver=driver, schema=schema, pool_size=consumers) as store:
        try:
            store.create_queue(DEAD_LETTERS)
            store.create_queue(QUEUE, retry_limit=1, dead_letter=DEAD_LETTERS)
            # Bars only on a terminal: piped output gets the results, not progress frames.
            with Progress(console=console, disable=not console.is_terminal) as progress:
                send_seconds = _send(store, jobs, progress)
                drain_seconds, retried = _drain(store, jobs, consumers, batch, progress)
            stats = store.queue_stats(QUEUE)
            dead_letters = store.queue_stats(DEAD_LETTERS).queued
        finally:
            _drop_schema(store, schema)
    return DemoResult(
        jobs=jobs,
        send_seconds=send_seconds,
        drain_seconds=drain_seconds,
        wall_seconds=time.perf_counter() - started,
        counts=stats.counts,
        retried=retried,
        dead_letters=dead_letters,
    )


def _send(store: alkstore.Store, jobs: int, progress: Progress) -> float:
    """Send the jobs in batches with ``send_many``; the seconds it took."""
    task = progress.add_task("send", total=jobs)
    started = time.perf_counter()
    for first in range(0, jobs, SEND_BATCH):
        numbers = range(first, min(first + SEND_BATCH, jobs))
        store.send_many(QUEUE, [{"data": {"n": n, "fail": n % FAIL_EVERY == 0}} for n in numbers])
        progress.advance(task, len(numbers))
    return time.perf_counter() - started


def _drain(
    store: alkstore.Store, jobs: int, consumers: int, batch: int, progress: Progress
) -> tuple[float, int]:
    """Run the consumers until every job is settled; the seconds it took, the jobs retried."""
    task = progress.add_task("drain", total=jobs)
    stop = threading.Event()
    started = time.perf_counter()
    with ThreadPoolExecutor(consumers, thread_name_prefix="consumer") as pool:
        futures = [
            pool.submit(_consume, store, batch, stop, lambda n: progress.advance(task, n))
            for _ in range(consumers)
        ]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        finally:
            stop.set()  # one consumer failed (or Ctrl-C): the others stop too
        retried = set().union(*(future.result() for future in futures))
    return time.perf_counter() - started, len(retried)


def _consume(
    store: alkstore.Store, batch: int, stop: threading.Event, settled: Callable[[int], None]
) -> set[uuid.UUID]:
    """One consumer: fetch a batch, complete the good jobs, fail the bad ones, until drained.

    Returns the ids of the jobs it fetched for a retry. ``settled`` is told how many jobs
    reached their final state (completed, or failed with no retry left).
    """
    retried: set[uuid.UUID] = set()
    while not stop.is_set():
        jobs = store.fetch(QUEUE, batch_size=batch)
        if not jobs:
            if _drained(store):
                break
            time.sleep(0.01)  # others hold jobs that may still come back for a retry
            continue
        good = [job for job in jobs if not job.data["fail"]]
        bad = [job for job in jobs if job.data["fail"]]
        if good:
            store.complete(QUEUE, good)  # Job objects: fenced to the attempt we fetched
        if bad:
            store.fail(QUEUE, bad, error=RuntimeError("this job always fails"))
        retried.update(job.id for job in jobs if job.retry_count > 0)
        settled(len(good) + sum(_last_attempt(job) for job in bad))
    return retried


def _last_attempt(job: Job) -> bool:
    """Whether failing ``job`` now fails it for good (and dead-letters it)."""
    return job.retry_count >= job.retry_limit


def _drained(store: alkstore.Store) -> bool:
    """Whether no job of the queue is waiting or being worked on."""
    stats = store.queue_stats(QUEUE)
    return stats.queued == 0 and stats.counts[JobState.ACTIVE] == 0


def _drop_schema(store: alkstore.Store, schema: str) -> None:
    """Housekeeping rather than API: drop the demo's schema through the store's connection."""
    from ..core.plans import Statement, single
    from ..engines.postgres.identifiers import quote_schema

    drop = Statement(f"DROP SCHEMA {quote_schema(schema)} CASCADE")
    store._run(single("drop-demo-schema", drop, lambda rows: None))


def summary_table(result: DemoResult, title: str, caption: str = "") -> Table:
    """The summary: throughput, the main queue's states, retries, dead letters, wall time."""
    table = Table(title=title, caption=caption or None)
    table.add_column("")
    table.add_column("value", justify="right")
    for step, seconds in (("send", result.send_seconds), ("drain", result.drain_seconds)):
        rate = result.jobs / seconds if seconds > 0 else float("inf")
        table.add_row(step, f"{rate:,.0f} jobs/s ({seconds:.2f} s)")
    table.add_section()
    for state in JobState:
        table.add_row(f"{QUEUE}: {state}", f"{result.counts[state]:,}")
    table.add_section()
    table.add_row("retried (retry_count > 0)", f"{result.retried:,}")
    table.add_row(f"dead letters ({DEAD_LETTERS})", f"{result.dead_letters:,}")
    table.add_row("wall time", f"{result.wall_seconds:.2f} s")
    return table


def run(args: argparse.Namespace) -> int:
    """Handler of ``alkstore demo``: 0 when every job ended where it should."""
    console = Console()
    try:
        result = run_demo(
            args.dsn,
            jobs=args.jobs,
            consumers=args.consumers,
            batch=args.batch,
            driver=args.driver,
            console=console,
        )
    except Exception as exc:  # a command line tool: one line, not a traceback
        message = f"alkstore demo on {args.dsn}: {type(exc).__name__}: {exc}"
        console.print(message, style="red", highlight=False, markup=False)
        return 1
    title = f"alkstore demo: {args.jobs:,} jobs"
    caption = f"{args.consumers} consumers, fetch batch {args.batch}, driver {args.driver}"
    console.print(summary_table(result, title, caption))
    if not result.consistent:
        console.print(
            f"[red]expected {result.jobs - result.always_failing:,} completed and "
            f"{result.always_failing:,} failed, retried and dead-lettered[/red]"
        )
        return 1
    return 0


__all__ = [
    "DEAD_LETTERS",
    "FAIL_EVERY",
    "QUEUE",
    "SEND_BATCH",
    "DemoResult",
    "register",
    "run",
    "run_demo",
    "summary_table",
]
