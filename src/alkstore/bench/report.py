"""What every command shows and keeps: a rich table, a progress bar, JSON and a chart.

Rows are the flat JSON dicts the measurements produce; a table is a list of
:class:`Column` picking keys out of them, so every command prints and saves the same way.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .progress import polling

RESULTS_DIR = Path("bench-results")
"""Where results go unless ``--json`` says otherwise."""

Row = Mapping[str, Any]

out = Console()
"""Tables go to standard output (200 columns wide when it is not a terminal, so that tables
written to a file or a CI log are not truncated)."""
if not out.is_terminal:
    out = Console(width=200)
err = Console(stderr=True)
"""Progress bars and notes go to standard error."""


def number(value: Any, digits: int = 0) -> str:
    """A table cell: thousands separators, ``digits`` decimals, ``-`` for nothing."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return str(value)


@attrs.frozen
class Column:
    """A table column: the row key it shows, its header, and how a value is written."""

    key: str
    header: str
    digits: int = 0
    justify: str = "right"

    def cell(self, row: Row) -> str:
        """The text of this column for ``row``."""
        if not row.get("available", True) and self.key not in IDENTITY_KEYS:
            return ""
        return number(row.get(self.key), self.digits)


IDENTITY_KEYS = frozenset({"system", "variant", "engine", "driver", "consumers", "batch", "label"})

BACKEND_COLUMNS = (
    Column("engine", "engine", justify="left"),
    Column("driver", "driver", justify="left"),
)
"""The engine and driver of a row (the first columns of the alkstore-only tables)."""

PEAK_RSS_COLUMN = Column("peak_rss_mb", "peak RSS MiB", 1)
"""The peak RSS of the process that measured a row."""

DRAIN_COLUMNS = (
    Column("system", "system", justify="left"),
    *BACKEND_COLUMNS,
    Column("consumers", "consumers"),
    Column("batch", "batch"),
    Column("jobs_per_s", "jobs/s"),
    Column("fetch_p50_ms", "fetch p50 ms", 2),
    Column("fetch_p99_ms", "fetch p99 ms", 2),
    Column("empty_fetches", "empty fetches"),
    Column("duplicates", "duplicates"),
    Column("completed", "completed"),
    Column("client_cpu_us_per_job", "client CPU µs/job", 1),
    Column("server_cpu_us_per_job", "server CPU µs/job", 1),
    PEAK_RSS_COLUMN,
)
"""The columns of a drain table (drain, contention, peers)."""


def print_table(
    title: str, columns: Sequence[Column], rows: Sequence[Row], notes: Sequence[str] = ()
) -> None:
    """Print ``rows`` as a rich table; unavailable rows show their reason in the last column."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column.header, justify=column.justify)  # type: ignore[arg-type]
    for row in rows:
        cells = [column.cell(row) for column in columns]
        if not row.get("available", True):
            cells[-1] = f"not available: {row.get('reason', '?')}"
        table.add_row(*cells)
    out.print(table)
    for note in notes:
        out.print(note)


class BenchProgress:
    """A progress bar per phase, fed by polling a counter (so the timed loops never touch it)."""

    def __init__(self, enabled: bool = True) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            disable=not enabled,
        )

    def __enter__(self) -> BenchProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def track(
        self, description: str, total: int, read: Callable[[], int]
    ) -> contextlib.AbstractContextManager[None]:
        """Show ``read()`` against ``total`` while the block runs."""
        task = self._progress.add_task(description, total=total)
        return polling(read, lambda value: self._progress.update(task, completed=value))


def default_json_path(command: str, now: dt.datetime | None = None) -> Path:
    """``bench-results/<command>-<timestamp>.json``."""
    stamp = (now or dt.datetime.now()).strftime("%Y%m%d-%H%M%S")
    return RESULTS_DIR / f"{command}-{stamp}.json"


def write_json(path: Path, document: Mapping[str, Any]) -> Path:
    """Write the results document (parents created); returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")
    return path


def series_label(row: Row) -> str:
    """The chart series a drain row belongs to: system, engine/driver and batch size."""
    parts = [str(row["system"])]
    backend = "/".join(str(row[k]) for k in ("engine", "driver") if row.get(k))
    if backend:
        parts.append(backend)
    parts.append(f"batch {row['batch']}")
    return " ".join(parts)


def plot_throughput(path: Path, title: str, rows: Sequence[Row]) -> Path:
    """A PNG of jobs/s against consumers, one line per system/engine/driver/batch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        if row.get("available", True) and row.get("jobs_per_s") is not None:
            series.setdefault(series_label(row), []).append(
                (int(row["consumers"]), float(row["jobs_per_s"]))
            )
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ticks = sorted({x for points in series.values() for x, _ in points})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("consumers")
    ax.set_ylabel("jobs/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if series:
        ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_bars(path: Path, title: str, ylabel: str, values: Mapping[str, float]) -> Path:
    """A PNG bar chart of labelled values (for commands whose x-axis is not consumers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    labels = list(values)
    ax.bar(range(len(labels)), [values[k] for k in labels])
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize="small")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = [
    "BACKEND_COLUMNS",
    "DRAIN_COLUMNS",
    "PEAK_RSS_COLUMN",
    "BenchProgress",
    "Column",
    "default_json_path",
    "err",
    "number",
    "out",
    "plot_bars",
    "plot_throughput",
    "print_table",
    "series_label",
    "write_json",
]
