"""``--driver all`` means the installed drivers; the others are skipped with their pip command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from alkstore.cli import conformance
from alkstore.conformance.harness import installed_variants
from alkstore.drivers import not_installed, registry

PIP_PG8000 = 'pip install "alkstore[pg8000]"'


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich wraps at COLUMNS when output is not a terminal: keep lines whole for matching."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def without_pg8000(monkeypatch: pytest.MonkeyPatch) -> None:
    """pg8000's client library is not installed (importing it fails) for this test."""
    monkeypatch.setitem(sys.modules, "pg8000", None)
    monkeypatch.delitem(sys.modules, "alkstore.drivers.pg8000", raising=False)


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="alkstore")
    conformance.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["conformance", *argv])
    status: int = args.handler(args)
    return status


def test_all_installed_drivers_are_every_registered_one_here() -> None:
    assert not_installed() == {}
    assert installed_variants() == list(registry())


@pytest.mark.usefixtures("without_pg8000")
def test_a_driver_whose_library_is_missing_is_not_in_all() -> None:
    assert not_installed() == {"pg8000": PIP_PG8000}
    assert "pg8000" not in installed_variants()
    assert conformance.parse_drivers("all") == ["psycopg", "psycopg-async", "asyncpg"]


@pytest.mark.usefixtures("without_pg8000")
def test_naming_a_missing_driver_is_refused_with_its_pip_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _run("--driver", "psycopg,pg8000") == 2
    out = capsys.readouterr().out
    assert "not installed: pg8000" in out
    assert PIP_PG8000 in out


@pytest.mark.usefixtures("without_pg8000")
def test_driver_all_skips_missing_drivers_without_failing(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "matrix.json"
    argv = ["--dsn", pg_dsn, "--engine", "postgres", "--driver", "all"]
    assert _run(*argv, "-k", "test_get_unknown_queue_is_none", "--json", str(report)) == 0
    document = json.loads(report.read_text())
    assert document["drivers"] == ["psycopg", "psycopg-async", "asyncpg"]
    assert document["drivers_not_installed"] == {"pg8000": PIP_PG8000}
    assert document["failures"] == []
    assert "pg8000" not in document["matrix"]["queues"]
    out = capsys.readouterr().out
    assert "drivers skipped, not installed (1):" in out
    assert f"pg8000: {PIP_PG8000}" in out
