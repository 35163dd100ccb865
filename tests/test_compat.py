"""The compatibility matrix: counted from the runs' records, and current in the docs."""

from __future__ import annotations

import json
from pathlib import Path

from alkstore.conformance.compat import (
    BEGIN,
    END,
    markdown,
    read_json,
    replace_section,
    summarize,
)

ROOT = Path(__file__).resolve().parents[1]
SUITE = "src/alkstore/conformance/suite/test_send.py::"


def _line(test: str, driver: str, outcome: str, phase: str = "call", message: str = "") -> str:
    record = {"kind": "test", "test": SUITE + test, "area": "send", "driver": driver}
    return json.dumps({**record, "outcome": outcome, "phase": phase, "message": message})


def test_outcomes_are_counted_per_driver_and_only_for_the_suite(tmp_path: Path) -> None:
    lines = [
        json.dumps({"kind": "collected", "count": 4}),
        _line("a[psycopg]", "psycopg", "passed"),
        _line("b[psycopg]", "psycopg", "failed", message="boom"),
        _line("a[asyncpg]", "asyncpg", "skipped", message="lacks x"),
        json.dumps(
            {"kind": "test", "test": "tests/test_cli.py::t", "area": "cli", "driver": "-"}
            | {"outcome": "failed", "phase": "call", "message": ""}
        ),
    ]
    path = tmp_path / "99.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = summarize(path)
    assert result.version is None  # no PostgreSQL 99 here
    assert result.drivers["psycopg"].to_json() == {"passed": 1, "failed": 1, "skipped": 0}
    assert result.drivers["asyncpg"].to_json() == {"passed": 0, "failed": 0, "skipped": 1}
    assert result.skip_reason is None
    table = markdown([result])
    assert "| PostgreSQL 99 | 1 passed, **1 failed** | 1 skipped |" in table


def test_a_server_that_could_not_be_had_is_named_with_its_reason(tmp_path: Path) -> None:
    reason = "server unavailable: no npm"
    path = tmp_path / "13-pgbouncer.jsonl"
    path.write_text(_line("a[psycopg]", "psycopg", "skipped", "setup", reason) + "\n")
    result = summarize(path)
    assert result.skip_reason == reason
    assert f"every test skipped: {reason}" in markdown([result])


def test_the_docs_show_the_last_recorded_matrix() -> None:
    page = (ROOT / "docs/engines.md").read_text()
    assert BEGIN in page and END in page
    results = read_json(ROOT / "docs/compat-matrix.json")
    assert replace_section(page, markdown(results)) == page, "run ./run.sh test (no options)"
