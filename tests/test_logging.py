"""Issue 16 item 5: the library reports through stdlib ``logging`` under ``alkstore.*`` with
the queue and the job id as ``extra`` fields, and prints nothing itself."""

from __future__ import annotations

import ast
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import alkstore

SRC = Path(alkstore.__file__).parent
COMMAND_LINE = ("cli", "bench", "conformance")
"""Packages that are programs (their output is the point), not the library."""


def test_a_failed_job_is_logged_with_its_queue_and_id(
    pg_dsn: str, schema_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    def handler(job: alkstore.Job) -> None:
        raise RuntimeError("no")

    caplog.set_level(logging.INFO, logger="alkstore")
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("logged", retry_limit=0)
        job_id = store.send("logged", {"n": 1})
        with store.work("logged", handler, poll_interval=0.05):
            deadline = time.monotonic() + 20
            while not [r for r in caplog.records if getattr(r, "job_id", None)]:
                assert time.monotonic() < deadline, "no log record of the failed job"
                threading.Event().wait(0.02)
    failed = "handler_failed"
    (record,) = [r for r in caplog.records if getattr(r, "alkstore_event", None) == failed]
    assert record.name.startswith("alkstore.")
    extra: Any = record
    assert (extra.queue, extra.job_id) == ("logged", str(job_id))


def _prints(path: Path) -> list[int]:
    """Lines of ``path`` that call ``print`` outside an ``if __name__ == "__main__"`` block."""
    tree = ast.parse(path.read_text())
    main_blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
    ]
    skip = {id(n) for block in main_blocks for n in ast.walk(block)}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
        and id(node) not in skip
    ]


def test_the_library_prints_nothing() -> None:
    found = {
        str(path.relative_to(SRC)): lines
        for path in SRC.rglob("*.py")
        if path.relative_to(SRC).parts[0] not in COMMAND_LINE and (lines := _prints(path))
    }
    assert found == {}
