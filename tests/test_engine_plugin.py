"""The "Writing an engine" example: a third-party engine found through its entry point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import alkstore
from alkstore.engines.postgres import PostgresEngine

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "lockfree_engine"


def _install_example(site: Path) -> None:
    """What ``pip install`` of the example leaves behind: the module and its entry point."""
    shutil.copy(EXAMPLE / "alkstore_lockfree.py", site)
    dist = site / "alkstore_lockfree-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: alkstore-lockfree\nVersion: 0.1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[alkstore.engines]\nlockfree-postgres = alkstore_lockfree:LockFreePostgresEngine\n"
    )


def test_conformance_runs_against_the_example_engine(tmp_path, pg_dsn):
    site = tmp_path / "site"
    site.mkdir()
    _install_example(site)
    report = tmp_path / "matrix.json"
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "alkstore.cli",
            "conformance",
            "--dsn",
            pg_dsn,
            "--engine",
            "lockfree-postgres",
            "--driver",
            "psycopg",
            "-k",
            "lifecycle or delivery or retries",
            "--json",
            str(report),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    matrix = json.loads(report.read_text())
    assert "lockfree-postgres" in json.dumps(matrix)
    assert "passed" in result.stdout or "passed" in json.dumps(matrix)


def test_the_example_engine_uses_the_lock_free_claim(tmp_path, pg_dsn, monkeypatch, schema_name):
    site = tmp_path / "site"
    site.mkdir()
    _install_example(site)
    monkeypatch.syspath_prepend(str(site))
    with alkstore.connect(pg_dsn, engine="lockfree-postgres", schema=schema_name) as store:
        assert type(store.engine).__name__ == "LockFreePostgresEngine"
        assert not isinstance(store.engine, PostgresEngine), "it delegates, it does not subclass"
        assert store.engine.capabilities.skip_locked is False
        store.create_queue("q", retry_limit=0)
        ids = store.send_many("q", [{"data": i} for i in range(3)])
        jobs = store.fetch("q", batch_size=3)
        assert [j.id for j in jobs] == ids
        assert store.fail("q", jobs) == 3
