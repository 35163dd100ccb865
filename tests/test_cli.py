"""``alkstore demo`` and ``alkstore conformance`` against a real PostgreSQL (a TempCluster).

The commands run in-process through their modules' ``register`` (exactly what
``alkstore.cli.main`` registers), so a broken sibling subcommand cannot fail these tests.
``alkstore conformance`` itself runs the suite in a pytest subprocess. The matrix builder is
also tested on its own, with synthetic pytest reports.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from alkstore import cli
from alkstore.cli import conformance, demo
from alkstore.conformance.cluster import TempCluster
from alkstore.conformance.matrix import (
    NO_DRIVER,
    TestOutcome,
    build_matrix,
    exit_status,
    outcome_of,
    parse_record_lines,
)


@pytest.fixture(scope="module")
def _cli_dsn() -> Iterator[str]:
    with TempCluster() as cluster:
        yield cluster.dsn


def _schemas(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {row[0] for row in conn.execute("SELECT nspname FROM pg_namespace")}


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich wraps at COLUMNS when output is not a terminal: keep lines whole for matching."""
    monkeypatch.setenv("COLUMNS", "200")


def run_cli(*argv: str) -> int:
    """``alkstore ARGV`` with the demo and conformance subcommands."""
    parser = argparse.ArgumentParser(prog="alkstore")
    subparsers = parser.add_subparsers(dest="command", required=True)
    demo.register(subparsers)
    conformance.register(subparsers)
    args = parser.parse_args(argv)
    status: int = args.handler(args)
    return status


def test_both_subcommands_are_registered_by_the_cli() -> None:
    assert {"demo", "conformance"} <= set(cli.SUBCOMMANDS)


@pytest.mark.parametrize("command", ["demo", "conformance"])
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(command, "--help")
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: alkstore {command}" in out
    assert "--dsn" in out and "--driver" in out


# --- demo -------------------------------------------------------------------------------------


def _row(out: str, label: str) -> int:
    found = re.search(rf"{re.escape(label)}\s*│\s*([\d,]+)\s*│", out)
    assert found, f"no row {label!r} in:\n{out}"
    return int(found.group(1).replace(",", ""))


def test_demo_drains_everything_and_dead_letters_the_failing_jobs(
    _cli_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("demo", "--dsn", _cli_dsn, "--jobs", "500", "--consumers", "3") == 0
    out = capsys.readouterr().out
    failing = len(range(0, 500, demo.FAIL_EVERY))  # jobs 0, 100, ..., 400
    assert failing == 5
    assert _row(out, "demo: completed") == 500 - failing
    assert _row(out, "demo: failed") == failing
    for state in ("created", "retry", "active", "cancelled"):
        assert _row(out, f"demo: {state}") == 0
    assert _row(out, "retried (retry_count > 0)") == failing
    assert _row(out, "dead letters (demo.dead)") == failing
    assert re.search(r"send\s*│\s*[\d,]+ jobs/s", out)
    assert re.search(r"drain\s*│\s*[\d,]+ jobs/s", out)
    assert "wall time" in out
    assert "100%" not in out  # not a terminal: no progress bars
    with psycopg.connect(_cli_dsn) as conn:
        left = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'demo_%'")
        assert left.fetchall() == [], "the demo's schema was not dropped"


def test_demo_with_pg8000_and_a_batch_larger_than_the_queue(
    _cli_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = run_cli(
        "demo", "--dsn", _cli_dsn, "--jobs", "150", "--batch", "500", "--driver", "pg8000"
    )
    assert status == 0
    out = capsys.readouterr().out
    assert _row(out, "demo: completed") == 148
    assert _row(out, "dead letters (demo.dead)") == 2


def test_demo_on_an_unreachable_database_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("demo", "--dsn", f"postgresql://postgres@127.0.0.1:{_closed_port()}/x") == 1
    assert "alkstore demo on postgresql://" in capsys.readouterr().out


# --- the matrix, from synthetic reports -------------------------------------------------------


def _report(when: str, outcome: str, longrepr: Any = None, **extra: Any) -> pytest.TestReport:
    return pytest.TestReport("t.py::x", ("t.py", 1, "x"), {}, outcome, longrepr, when, **extra)  # type: ignore[arg-type]


PASSED = [_report("setup", "passed"), _report("call", "passed"), _report("teardown", "passed")]


def _synthetic() -> list[TestOutcome]:
    skip = ("t.py", 1, "Skipped: cockroachdb lacks table_partitioning: no PARTITION BY")
    return [
        outcome_of("test_queues.py::a[psycopg]", "queues", "psycopg", PASSED),
        outcome_of("test_queues.py::a[pg8000]", "queues", "pg8000", PASSED),
        outcome_of(
            "test_queues.py::b[pg8000]",
            "queues",
            "pg8000",
            [
                _report("setup", "passed"),
                _report("call", "failed", "AssertionError: assert 1 == 2\n  where ..."),
                _report("teardown", "passed"),
            ],
        ),
        outcome_of(
            "test_schema.py::p[psycopg]",
            "schema",
            "psycopg",
            [_report("setup", "skipped", skip), _report("teardown", "passed")],
            requires=("table_partitioning", "plpgsql"),
            lacking=("table_partitioning",),
        ),
        outcome_of(
            "test_send.py::c[asyncpg]",
            "send",
            "asyncpg",
            [
                _report("setup", "failed", "OSError: connection refused"),
                _report("teardown", "passed"),
            ],
        ),
        outcome_of(
            "test_send.py::d[asyncpg]",
            "send",
            "asyncpg",
            [
                _report("setup", "passed"),
                _report("call", "skipped", ("t.py", 1, "reason"), wasxfail="known gap"),
                _report("teardown", "passed"),
            ],
        ),
        outcome_of("test_model_stateful.py::M::runTest", "model_stateful", NO_DRIVER, PASSED),
    ]


def test_matrix_counts_outcomes_by_area_and_driver() -> None:
    matrix = build_matrix(_synthetic(), drivers=["psycopg", "pg8000", "asyncpg"])
    assert matrix.areas == ["queues", "send", "schema", "model_stateful"]
    assert matrix.drivers == ["psycopg", "asyncpg", "pg8000", NO_DRIVER]
    assert matrix.cell("queues", "pg8000").to_json() == {"passed": 1, "failed": 1, "skipped": 0}
    assert matrix.cell("send", "asyncpg").to_json() == {"passed": 0, "failed": 1, "skipped": 1}
    assert matrix.cell("schema", "pg8000").total == 0
    assert matrix.totals.to_json() == {"passed": 3, "failed": 2, "skipped": 2}
    failures = {f.nodeid: (f.phase, f.message) for f in matrix.failures}
    assert failures == {
        "test_queues.py::b[pg8000]": ("call", "AssertionError: assert 1 == 2"),
        "test_send.py::c[asyncpg]": ("setup", "OSError: connection refused"),
    }
    skips = {s.nodeid: (s.capabilities, s.message) for s in matrix.skips}
    assert skips == {
        "test_schema.py::p[psycopg]": (
            ("table_partitioning",),
            "cockroachdb lacks table_partitioning: no PARTITION BY",
        ),
        "test_send.py::d[asyncpg]": ((), "xfail: known gap"),
    }
    document = json.loads(json.dumps(matrix.to_json()))
    assert document["matrix"]["queues"]["psycopg"]["passed"] == 1
    assert [s["capabilities"] for s in document["skips"]] == [[], ["table_partitioning"]]


def test_exit_status_of_a_run() -> None:
    outcomes = _synthetic()
    failing = build_matrix(outcomes)
    passing = build_matrix(o for o in outcomes if o.outcome != "failed")
    assert exit_status(failing, 1) == 1
    assert exit_status(passing, 0) == 0
    assert exit_status(passing, 1) == 1  # pytest saw a failure the matrix did not
    assert exit_status(passing, 2) == 2  # interrupted
    assert exit_status(passing, -9) == 2  # killed
    assert exit_status(build_matrix([]), 5) == 5
    assert exit_status(build_matrix([]), 0) == 5


def test_records_round_trip_and_ignore_a_torn_last_line() -> None:
    outcomes = _synthetic()
    lines = [json.dumps({"kind": "collected", "count": len(outcomes)})]
    lines += [json.dumps({"kind": "test", **o.to_json()}) for o in outcomes]
    records = parse_record_lines([*lines, '{"kind": "test", "te'])
    assert records.collected == len(outcomes)
    assert records.outcomes == outcomes


# --- conformance, end to end ------------------------------------------------------------------


def test_conformance_writes_the_matrix_as_json(
    _cli_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "matrix.json"
    before = _schemas(_cli_dsn)
    argv = ["--dsn", _cli_dsn, "--engine", "postgres", "--driver", "pg8000", "-k", "queues"]
    assert run_cli("conformance", *argv, "--json", str(report)) == 0
    # The tests reuse each other's schemas; at the end the run leaves none behind.
    assert _schemas(_cli_dsn) == before
    document = json.loads(report.read_text())
    assert document["matrix"]["queues"]["pg8000"]["passed"] > 0
    assert document["matrix"]["queues"]["pg8000"]["failed"] == 0
    assert document["failures"] == []
    assert document["drivers"] == ["pg8000"] and document["exit_status"] == 0
    out = capsys.readouterr().out
    assert re.search(r"queues\s*│\s*\d+ / 0 / 0", out)


def test_conformance_engine_auto_detects_the_server_and_says_so(
    _cli_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "matrix.json"
    argv = ["--dsn", _cli_dsn, "--engine", "auto", "--driver", "pg8000", "-k", "unknown_queue"]
    assert run_cli("conformance", *argv, "--json", str(report)) == 0
    assert "engine auto: the server looks like postgres" in capsys.readouterr().out
    document = json.loads(report.read_text())
    assert document["engine"] == "postgres"
    assert document["matrix"]["queues"]["pg8000"]["passed"] > 0


def test_conformance_lists_skips_with_capability_and_reason(
    _cli_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "matrix.json"
    argv = ["--dsn", _cli_dsn, "--engine", "cockroachdb", "--emulate", "--driver", "psycopg"]
    assert run_cli("conformance", *argv, "-k", "partitioned_queue", "--json", str(report)) == 0
    skips = json.loads(report.read_text())["skips"]
    partitioned = [s for s in skips if "test_partitioned_queue" in s["test"]]
    assert len(partitioned) == 1
    assert "table_partitioning" in partitioned[0]["capabilities"]
    assert "cockroachdb lacks table_partitioning" in partitioned[0]["reason"]
    out = capsys.readouterr().out
    assert "skipped (1):" in out
    assert "capability table_partitioning, plpgsql: cockroachdb lacks table_partitioning" in out


def test_conformance_reports_failing_tests_and_exits_non_zero(
    _cli_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A role that may not create schemas: every store the suite opens fails in setup.
    with psycopg.connect(_cli_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS cli_limited")
        conn.execute("CREATE ROLE cli_limited LOGIN")
    dsn = _cli_dsn.replace("postgres@", "cli_limited@")
    report = tmp_path / "matrix.json"
    argv = ["--dsn", dsn, "--driver", "pg8000", "-k", "test_get_unknown_queue_is_none"]
    assert run_cli("conformance", *argv, "--json", str(report)) == 1
    document = json.loads(report.read_text())
    assert document["matrix"]["queues"]["pg8000"] == {"passed": 0, "failed": 1, "skipped": 0}
    [failure] = document["failures"]
    assert failure["phase"] == "setup"
    assert "permission denied" in failure["message"]
    out = capsys.readouterr().out
    assert "failed (1):" in out and "test_get_unknown_queue_is_none[pg8000] (setup)" in out


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens there once the socket is closed


def test_conformance_on_an_unreachable_database(capsys: pytest.CaptureFixture[str]) -> None:
    dsn = f"postgresql://postgres:secret@127.0.0.1:{_closed_port()}/postgres"
    assert run_cli("conformance", "--dsn", dsn, "--driver", "pg8000") == 2
    out = capsys.readouterr().out
    assert "cannot reach the database at postgresql://postgres:***@127.0.0.1" in out
    assert "refused" in out
    assert "secret" not in out


def test_conformance_with_no_test_selected_fails(
    _cli_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--dsn", _cli_dsn, "--driver", "pg8000", "-k", "no_such_test_anywhere"]
    assert run_cli("conformance", *argv) == 5
    assert "no tests collected matching -k 'no_such_test_anywhere'" in capsys.readouterr().out


def test_conformance_of_the_memory_engine_has_its_two_faces_as_drivers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "matrix.json"
    argv = ["--engine", "memory", "-k", "queues", "--json", str(report)]
    assert run_cli("conformance", *argv) == 0
    document = json.loads(report.read_text())
    assert document["drivers"] == ["memory", "memory-async"]
    assert document["drivers_not_installed"] == {}
    for face in ("memory", "memory-async"):
        cell = document["matrix"]["queues"][face]
        assert cell["passed"] > 0 and cell["failed"] == 0
    out = capsys.readouterr().out
    assert "engine memory on this process (no database)" in out
    assert re.search(r"queues\s*│\s*\d+ / 0 / 0\s*│\s*\d+ / 0 / 0", out)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine", "nosuchengine"], "unknown engine 'nosuchengine'"),
        (["--driver", "psycopg,odbc"], "unknown driver odbc"),
        (["--engine", "postgres", "--emulate"], "has no emulated mode"),
        (["--engine", "auto", "--emulate"], "--emulate needs an explicit --engine"),
        (["--engine", "memory", "--pg-version", "16"], "--engine memory reaches no database"),
        (["--engine", "memory", "--driver", "psycopg"], "unknown driver psycopg"),
    ],
)
def test_conformance_refuses_bad_arguments(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("conformance", *argv) == 2
    assert message in capsys.readouterr().out
