"""Helpers of the fault suite (imported by its tests; the fixtures are in conftest)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from alkstore.conformance.harness import Backend, StoreHandle

VARIANTS = ("psycopg", "psycopg-async", "asyncpg", "pg8000")
"""Every driver variant; the suite runs each fault through each."""

RESULTS: list[dict[str, Any]] = []
"""One row per fault-matrix scenario run, for the table printed at the end of the run."""

COLUMNS = ("fault", "driver", "sent", "completed", "lost", "duplicated", "stuck", "errors")
WORKER_COLUMNS = ("reruns after return", "settles retried")
"""The worker runtime's cells (``store.work``, ``alkstore worker``) add these; "-" for the
fetch/complete scenarios, which run no handler."""


def fault_table() -> str:
    """:data:`RESULTS` as a Markdown table (plus each row's slowest call and wall time)."""
    head = [*COLUMNS, *WORKER_COLUMNS, "slowest call", "wall"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in RESULTS:
        cells = [str(row.get(c, "-")) for c in (*COLUMNS, *WORKER_COLUMNS)]
        cells += [f"{row['slowest']:.2f}s", f"{row['seconds']:.1f}s"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def open_store(
    dsn: str, variant: str, schema: str, *, owner: bool = True, **options: Any
) -> StoreHandle:
    """A store through ``variant`` (a sync view of the async ones) with ``connect`` options;
    the ``owner`` drops the schema when closed."""
    return StoreHandle(Backend(dsn, "postgres", options=options), variant, schema, owner=owner)


def record_worker_cell(
    fault: str,
    driver: str,
    tally: dict[str, int],
    events: list[Any],
    seconds: float,
) -> None:
    """A row of the fault table for a worker-runtime cell: ``tally`` has sent, completed,
    lost, reruns and retried (settles); ``events`` are its worker events."""
    errors = Counter(e.kind for e in events if e.kind.endswith("_error"))
    RESULTS.append(
        {
            "fault": fault,
            "driver": driver,
            "sent": tally["sent"],
            "completed": tally["completed"],
            "lost": tally["lost"],
            "duplicated": "-",
            "stuck": tally["sent"] - tally["lost"] - tally["completed"],
            "errors": ", ".join(f"{k} x{v}" for k, v in sorted(errors.items())) or "-",
            "reruns after return": tally["reruns"],
            "settles retried": tally.get("retried", "-"),
            "slowest": 0.0,
            "seconds": seconds,
        }
    )


def wait_for(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def terminate_store_backends(admin: psycopg.Connection[Any], schema: str | None = None) -> int:
    """``pg_terminate_backend`` every alkstore connection (their application_name is
    ``alkstore``) and wait until they are gone; how many there were."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'alkstore'"
    ).fetchall()
    pids = [row[0] for row in rows]
    for pid in pids:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    def gone() -> bool:
        left = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
        ).fetchone()
        return left is not None and left[0] == 0

    wait_for(gone, f"backends {pids} to end")
    return len(pids)
