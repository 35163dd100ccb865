"""What every ``alkstore bench`` command shares.

:func:`run` holds what every command shares: find or start the server, warn when it is not
durable, show progress, fingerprint the environment, write the JSON and draw the chart. Each
command function only says what to measure and which tables to show.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from .. import event_loop
from ..drain import Backend, drain_alkstore
from ..environment import fingerprint
from ..isolation import run_isolated
from ..progress import Progress
from ..report import (
    BenchProgress,
    Column,
    default_json_path,
    err,
    plot_bars,
    plot_throughput,
    print_table,
    write_json,
)
from ..results import Outcome, Unavailable
from ..server import Server, bench_server

Row = dict[str, Any]
T = TypeVar("T")


@attrs.frozen
class Table:
    """A table to print: title, columns, rows and notes under it."""

    title: str
    columns: Sequence[Column]
    rows: Sequence[Row]
    notes: Sequence[str] = ()


@attrs.frozen
class Measured:
    """What a command measured: the JSON sections, the tables, and what to chart."""

    sections: Mapping[str, Any]
    """Top-level JSON keys -> values (``results`` at least)."""
    tables: Sequence[Table]
    plot: Callable[[Path, str], Path] | None = None
    environment: Mapping[str, Any] = attrs.field(factory=dict)
    """Extra fingerprint entries (peer versions)."""


@attrs.frozen(kw_only=True)
class Options:
    """What every command takes."""

    dsn: str | None = None
    json_path: Path | None = None
    plot_path: Path | None = None
    server_settings: Mapping[str, str] = attrs.field(factory=dict)
    timeout: float = 1800.0
    progress: bool = True
    emulate: bool = False
    """Run the engine behind its emulation guard on stock PostgreSQL (``--emulate``)."""
    pg_version: int | None = None
    """Major version of the throwaway server (``--pg-version``; None: the system's)."""
    pgbouncer: bool = False
    """Measured stores connect through a throwaway PgBouncer (``--pgbouncer``; drain only)."""
    connections: int | None = None
    """Server connections for the measured consumers' statements (``--connections``; drain
    and peers): alkstore's pool size (and in peers, raw SQL's and pg-boss's), or with
    :attr:`pgbouncer` the pooler's server pool."""
    event_loop: str = event_loop.DEFAULT
    """The loop async cells run on (``--event-loop``, :mod:`.event_loop`)."""


def run(
    command: str,
    options: Options,
    arguments: Mapping[str, Any],
    measure: Callable[[Server, BenchProgress], Measured],
) -> dict[str, Any]:
    """Run one command end to end; returns the JSON document it wrote."""
    started = dt.datetime.now(dt.UTC)
    event_loop.choose(options.event_loop)
    with bench_server(
        options.dsn,
        options.server_settings,
        options.pg_version,
        options.pgbouncer,
        options.connections if options.pgbouncer else None,
    ) as server:
        label = server.durability.label
        if not server.durability.durable:
            err.print(
                f"[bold yellow]warning:[/bold yellow] the server is {label}: these figures "
                "are not comparable to durable ones and must not be used as headline figures"
            )
        with BenchProgress(options.progress) as progress:
            measured = measure(server, progress)
        environment = fingerprint(
            server, {"event_loop": event_loop.described(), "peers": dict(measured.environment)}
        )
    document: dict[str, Any] = {
        "command": command,
        "arguments": dict(arguments),
        "durability": label,
        "started_at": started.isoformat(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        "environment": environment,
        **measured.sections,
    }
    for table in measured.tables:
        print_table(f"{table.title} [{label}]", table.columns, table.rows, table.notes)
    path = write_json(options.json_path or default_json_path(command), document)
    err.print(f"results written to {path}")
    if options.plot_path is not None and measured.plot is not None:
        chart = measured.plot(options.plot_path, f"alkstore bench {command} ({label})")
        err.print(f"chart written to {chart}")
    return document


def _arguments(**values: Any) -> dict[str, Any]:
    """The ``arguments`` section of a document: ``values`` with every sequence made a list."""
    return {
        key: list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value
        for key, value in values.items()
    }


def cells(consumers: Sequence[int], batches: Sequence[int]) -> list[tuple[int, int]]:
    """Every (consumers, batch) pair, batch-major."""
    return [(c, b) for b in batches for c in consumers]


def _schema(kind: str) -> str:
    return f"{kind}_bench_{os.getpid()}"


def _drain_one(
    server: Server,
    progress: BenchProgress,
    backend: Backend,
    jobs: int,
    consumers: int,
    batch: int,
    timeout: float,
) -> Outcome:
    """One alkstore drain cell, in a process of its own."""
    return run_isolated(
        progress,
        backend.cell(consumers, batch).description,
        jobs,
        _alkstore_cell,
        server.dsn,
        backend,
        jobs,
        consumers,
        batch,
        timeout,
    )


def _alkstore_cell(
    progress: Progress,
    dsn: str,
    backend: Backend,
    jobs: int,
    consumers: int,
    batch: int,
    timeout: float,
) -> Outcome:
    """The body of :func:`_drain_one` (runs in the child process)."""
    try:
        return drain_alkstore(
            dsn,
            backend,
            jobs=jobs,
            consumers=consumers,
            batch=batch,
            schema=_schema("alkstore"),
            progress=progress,
            timeout=timeout,
        )
    except Exception as exc:
        # An engine that cannot be loaded (ImportError: e.g. its emulation guard) is "not
        # available"; any other error (e.g. serialization failures past the retry limit) is a
        # finding of the run: reported as "failed" in its cell, and the exit status is 1.
        failed = "" if isinstance(exc, ImportError) else "failed: "
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Unavailable(
            cell=backend.cell(consumers, batch),
            reason=f"{failed}{type(exc).__name__}: {first_line}",
        )


def _rows(results: Sequence[Outcome]) -> list[Row]:
    return [r.to_json() for r in results]


def _throughput_chart(rows: Sequence[Row]) -> Callable[[Path, str], Path]:
    return lambda path, title: plot_throughput(path, title, rows)


def _bar_chart(ylabel: str, values: Mapping[str, float]) -> Callable[[Path, str], Path]:
    return lambda path, title: plot_bars(path, title, ylabel, values)


def _each(
    progress: BenchProgress, description: str, items: Sequence[T], one: Callable[[T], Row]
) -> list[Row]:
    """``one(item)`` for every item in turn, counted on a progress bar."""
    rows: list[Row] = []
    with progress.track(description, len(items), lambda: len(rows)):
        for item in items:
            rows.append(one(item))
    return rows


# --- drain ---------------------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or None when either is missing or zero."""
    return a / b if a and b else None
