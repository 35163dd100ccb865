"""The environment fingerprint stored with every result: server, machine, libraries, commit."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg

from .server import Server, admin_connection

LIBRARIES = (
    "alkstore",
    "psycopg",
    "psycopg-binary",
    "psycopg-pool",
    "asyncpg",
    "pg8000",
    "pgqueuer",
    "procrastinate",
    "uvloop",
)
"""Python distributions whose versions are recorded (None when not installed)."""

SERVER_SETTINGS = (
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_level",
    "wal_sync_method",
    "commit_delay",
    "commit_siblings",
    "shared_buffers",
    "max_connections",
    "max_wal_size",
)
"""Server settings recorded besides ``version()``."""


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """Installed version of each distribution, None where it is missing."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(directory: Path | None = None) -> dict[str, Any] | None:
    """``git rev-parse HEAD`` of the checkout alkstore runs from, and whether it is dirty.

    Dirty means changed or untracked (not ignored) files: code the commit does not hold.
    """
    where = directory or Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def server_fingerprint(server: Server) -> dict[str, Any]:
    """What the server says it is and how it is set up."""
    info: dict[str, Any] = {
        "temporary_cluster": server.temporary,
        "durable": server.durability.durable,
        "durability": server.durability.label,
    }
    with admin_connection(server.dsn) as conn:
        info["version"] = str(conn.execute("SELECT version()").fetchone()[0])  # type: ignore[index]
        info["server_version_num"] = int(
            conn.execute("SHOW server_version_num").fetchone()[0]  # type: ignore[index]
        )
        for name in SERVER_SETTINGS:
            row = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
            info[name] = str(row[0])  # type: ignore[index]
        with contextlib.suppress(psycopg.Error):
            info["data_directory"] = str(
                conn.execute("SHOW data_directory").fetchone()[0]  # type: ignore[index]
            )
    return info


def _memory_bytes() -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


def fingerprint(server: Server, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole fingerprint; ``extra`` adds entries (e.g. Node and pg-boss versions).

    ``machine.load_average`` (1, 5 and 15 minutes, taken when the run ends) tells whether
    something else was using the machine while it ran.
    """
    return {
        "postgresql": server_fingerprint(server),
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_average": list(os.getloadavg()),
            "memory_bytes": _memory_bytes(),
            "platform": platform.platform(),
            "processor": platform.machine(),
        },
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "libraries": library_versions(),
        "alkstore_git": git_commit(),
        **(extra or {}),
    }


__all__ = ["fingerprint", "git_commit", "library_versions", "server_fingerprint"]
