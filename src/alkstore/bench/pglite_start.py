"""``bench pglite-start``: how long ``alkstore.connect("pglite://…")`` takes to return.

Three ways to start, each ``runs`` times, interleaved so that machine load falls on all
alike: ``fresh`` (an in-memory database, from the cached migrated copy), ``reopened`` (a
data directory made once before the runs) and, unless left out, ``fresh, no cache`` (a
bridge that runs initdb and then the migration, which is what ``fresh`` was before the
cache; docs/engines.md, "PGlite"). Each time covers the whole ``connect``: node start, PGlite
start, the connection and the schema check or migration. One warm-up ``connect`` first makes
sure the cached copy exists (the first fresh start of a PGlite version writes it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import alkstore

from ..engines.pglite.bridge import start_bridge
from .report import Column, default_json_path, err, print_table, write_json

COLUMNS = (
    Column("start", "start", justify="left"),
    Column("runs", "runs"),
    Column("median_s", "median s", 2),
    Column("min_s", "min s", 2),
    Column("max_s", "max s", 2),
    Column("load_1m", "load (1 min)", 1),
)

FRESH = "fresh (in memory)"
REOPENED = "reopened (data directory)"
UNCACHED = "fresh, no cache (initdb + migration)"
BRIDGE_TIMEOUT = 600.0
"""Seconds a bridge may take to be ready while measuring (a loaded machine is slow)."""


def _connect(uri: str) -> Callable[[], None]:
    """Start a store on ``uri``; returns how to close it."""
    return alkstore.connect(uri).close


def _uncached() -> Callable[[], None]:
    """Start a bridge that runs initdb and the migration, and a store on it; returns how to
    close both."""
    with contextlib.ExitStack() as stack:
        bridge = stack.enter_context(start_bridge(None, timeout=BRIDGE_TIMEOUT))
        stack.callback(alkstore.connect(bridge.dsn, engine="pglite").close)
        return stack.pop_all().close


def _timed(start: Callable[[], Callable[[], None]]) -> tuple[float, float]:
    """Seconds until ``start`` returns (the closing after it is not timed), and the load."""
    began = time.perf_counter()
    close = start()
    seconds = time.perf_counter() - began
    close()
    return seconds, os.getloadavg()[0]


def _node_version() -> str | None:
    try:
        out = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def measure(runs: int, *, uncached: bool) -> list[dict[str, Any]]:
    """Time ``runs`` starts of each kind (interleaved); one row per kind."""
    with tempfile.TemporaryDirectory(prefix="alkstore-pglite-start-") as tmp:
        data_uri = f"pglite://{Path(tmp) / 'db'}"
        _connect("pglite://")()  # writes the cached copy if this version has none yet
        _connect(data_uri)()
        starts: dict[str, Callable[[], Callable[[], None]]] = {
            FRESH: lambda: _connect("pglite://"),
            REOPENED: lambda: _connect(data_uri),
        }
        if uncached:
            starts[UNCACHED] = _uncached
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in starts}
        for run in range(runs):
            for name, start in starts.items():
                err.print(f"run {run + 1}/{runs}: {name}")
                samples[name].append(_timed(start))
    rows = []
    for name, taken in samples.items():
        seconds = [s for s, _ in taken]
        rows.append(
            {
                "start": name,
                "runs": len(seconds),
                "median_s": statistics.median(seconds),
                "min_s": min(seconds),
                "max_s": max(seconds),
                "load_1m": statistics.median(load for _, load in taken),
                "seconds": seconds,
            }
        )
    return rows


def pglite_start(runs: int, *, uncached: bool, json_path: Path | None) -> dict[str, Any]:
    """Measure, print the table and write the JSON document; returns the document."""
    started = dt.datetime.now(dt.UTC)
    rows = measure(runs, uncached=uncached)
    document = {
        "command": "pglite-start",
        "arguments": {"runs": runs, "uncached": uncached},
        "started_at": started.isoformat(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        "environment": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "node": _node_version(),
            "load_at_end": list(os.getloadavg()),
        },
        "results": rows,
    }
    notes = [
        'each: alkstore.connect("pglite://…") until it returns, then close (not timed); '
        "kinds interleaved run by run; load: the 1-minute load average after each start"
    ]
    print_table("PGlite start", COLUMNS, rows, notes)
    path = write_json(json_path or default_json_path("pglite-start"), document)
    err.print(f"results written to {path}")
    return document
