"""pg-boss 12 (Node.js), driven by ``benchmarks/peers/pgboss/drain.mjs`` (its fetch/complete
loop, or with :func:`drain_work` its ``work()``) and ``latency.mjs`` (``work()`` woken by
NOTIFY, for ``bench latency``).

On first use the script's npm packages are installed from its lock file (``npm ci``) into a
cache directory keyed by the lock file's hash: ``$ALKSTORE_BENCH_CACHE`` or
``~/.cache/alkstore-bench``. The script prints its samples as JSON; the completed count is
read from pg-boss's job table here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...engines.postgres.identifiers import quote_schema
from ..loops import LoopOutcome
from ..measure import CpuUse, local_postmaster, server_cpu_seconds
from ..progress import Progress
from ..results import DrainResult
from ..server import STEADY, admin_connection, drop_schema
from .spec import DrainSpec

NAME = "pg-boss"
QUEUE = "bench"
FILES = (
    "package.json",
    "package-lock.json",
    "boss.mjs",
    "drain.mjs",
    "latency.mjs",
    "pressure.mjs",
)
INSTALL_TIMEOUT = 600.0


def script_dir() -> Path:
    """``benchmarks/peers/pgboss`` of the source checkout (``$ALKSTORE_PGBOSS_DIR`` overrides)."""
    override = os.environ.get("ALKSTORE_PGBOSS_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[4] / "benchmarks" / "peers" / "pgboss"


def cache_root() -> Path:
    """Where npm packages of benchmark peers are installed."""
    override = os.environ.get("ALKSTORE_BENCH_CACHE")
    return Path(override) if override else Path.home() / ".cache" / "alkstore-bench"


def unavailable() -> str | None:
    """Why pg-boss cannot run here, or None."""
    if shutil.which("node") is None:
        return "node not found on PATH"
    if shutil.which("npm") is None:
        return "npm not found on PATH"
    missing = [name for name in FILES if not (script_dir() / name).is_file()]
    if missing:
        return f"{script_dir()} lacks {', '.join(missing)} (run from a source checkout)"
    try:
        install()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"npm ci failed: {exc}"
    return None


@functools.cache
def install() -> Path:
    """The cache directory with the script and its packages installed (``npm ci`` once)."""
    source = script_dir()
    lock = (source / "package-lock.json").read_bytes()
    target = cache_root() / f"pgboss-{hashlib.sha256(lock).hexdigest()[:16]}"
    marker = target / "node_modules" / ".alkstore-installed"
    target.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(source / name, target / name)
    if not marker.exists():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=target,
            check=True,
            capture_output=True,
            timeout=INSTALL_TIMEOUT,
        )
        marker.write_text("npm ci from the lock file\n")
    return target


def versions() -> dict[str, object]:
    """Node.js and pg-boss versions."""
    target = install()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30)
    package = json.loads((target / "node_modules" / "pg-boss" / "package.json").read_text())
    return {"node": node.stdout.strip(), "pg-boss": package.get("version")}


def drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """Run the Node script for one cell (its fetch/complete loop) and read back its samples."""
    return _drain(dsn, spec, schema, progress, "loop")


def drain_work(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """The same cell drained through pg-boss's ``work()`` (the ``pg-boss-work`` peer)."""
    return _drain(dsn, spec, schema, progress, "work")


def _drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress, mode: str) -> DrainResult:
    args = {
        "mode": mode,
        "dsn": dsn,
        "schema": schema,
        "queue": QUEUE,
        "jobs": spec.jobs,
        "consumers": spec.consumers,
        "connections": spec.pool_size,
        "batch": spec.batch,
        "warmup": spec.warmup,
        "timeoutSeconds": spec.timeout,
        "analyze": spec.variant == STEADY,
    }
    system = NAME if mode == "loop" else f"{NAME}-work"
    cell = spec.cell(system, "node-postgres")
    drop_schema(dsn, schema)
    finished = [0]  # the script reports only at the end
    try:
        with progress.track(cell.description, spec.jobs, lambda: finished[0]):
            cpu = CpuUse()
            data = _node("drain.mjs", args, spec.timeout * 2 + 300, _server_cpu(dsn, cpu))
            completed = finished[0] = _completed(dsn, schema)
    finally:
        drop_schema(dsn, schema)
    outcome = LoopOutcome(
        seconds=float(data["seconds"]),
        ids=list(data["ids"]),
        fetch_seconds=[float(s) for s in data["fetchSeconds"]],
        empty_fetches=int(data["emptyFetches"]),
        completed=completed,
        timed_out=bool(data["timedOut"]),
    )
    return DrainResult.from_outcome(
        cell,
        spec.jobs,
        outcome,
        completed,
        int(data["peakRssBytes"]),
        float(data["enqueueSeconds"]),
        note="peak RSS of the Node process",
        cpu=cpu,
    )


def latency(dsn: str, rate: float, total: int, concurrency: int, schema: str) -> dict[str, Any]:
    """``{waits, sends}`` (seconds) of ``total`` jobs sent at ``rate`` to ``work()``."""
    args = {
        "dsn": dsn,
        "schema": schema,
        "queue": QUEUE,
        "rate": rate,
        "total": total,
        "concurrency": concurrency,
        "timeoutSeconds": total / rate + 60.0,
    }
    drop_schema(dsn, schema)
    try:
        return _node("latency.mjs", args, total / rate + 300)
    finally:
        drop_schema(dsn, schema)


def pressure(
    dsn: str, schema: str, shape: dict[str, Any], started: Callable[[], None], timeout: float
) -> dict[str, Any]:
    """Run ``pressure.mjs`` with ``shape`` (rate, consumers, batch, seconds, poll); calls
    ``started`` when the script's clock starts; the JSON it prints at the end."""
    drop_schema(dsn, schema)
    args = {"dsn": dsn, "schema": schema, "queue": QUEUE, **shape}

    def on_line(line: str) -> None:
        if line == "ready":
            started()

    try:
        return _node("pressure.mjs", args, timeout, on_line)
    finally:
        drop_schema(dsn, schema)


def _node(
    script: str,
    args: dict[str, Any],
    timeout: float,
    on_line: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run ``script`` of the installed directory with ``args``; the JSON object it prints
    (a line of its own). ``on_line`` is called with every other line, as it comes."""
    with (
        tempfile.TemporaryFile("w+") as errors,
        subprocess.Popen(
            ["node", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=install(),
            text=True,
        ) as node,
    ):
        assert node.stdin is not None and node.stdout is not None
        node.stdin.write(json.dumps(args))  # on stdin: the DSN stays out of the process list
        node.stdin.close()
        deadline = threading.Timer(timeout, node.kill)
        deadline.start()
        try:
            last = ""
            for line in node.stdout:
                if line.startswith("{"):
                    last = line
                elif on_line is not None:
                    on_line(line.strip())
            node.wait()
        finally:
            deadline.cancel()
        if node.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"node exited {node.returncode}: {errors.read().strip()[-2000:]}")
    result: dict[str, Any] = json.loads(last)
    return result


def _server_cpu(dsn: str, cpu: CpuUse) -> Callable[[str], None]:
    """An ``on_line`` of :func:`_node` that fills ``cpu.server_seconds`` with the server's
    CPU time between the lines ``timed`` and ``drained``."""
    postmaster = local_postmaster(dsn)
    began: list[float | None] = [None]

    def on_line(line: str) -> None:
        now = None if postmaster is None else server_cpu_seconds(postmaster)
        if line == "timed":
            began[0] = now
        elif line == "drained" and now is not None and began[0] is not None:
            cpu.server_seconds = now - began[0]

    return on_line


def _completed(dsn: str, schema: str) -> int:
    table = f"{quote_schema(schema)}.job"
    with admin_connection(dsn) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM {table} WHERE name = %s AND state = %s",
            (QUEUE, "completed"),
        ).fetchone()
    return int(row[0]) if row else 0


__all__ = [
    "NAME",
    "cache_root",
    "drain",
    "drain_work",
    "install",
    "latency",
    "pressure",
    "script_dir",
    "unavailable",
    "versions",
]
