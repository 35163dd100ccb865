"""The "Writing an engine" example: a third-party engine found through its entry point."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import threading
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


def test_the_example_engine_runs_a_worker_a_schedule_and_a_publish(
    tmp_path, pg_dsn, monkeypatch, schema_name
):
    """What the runtime needs of an engine is in the engine contract: a third-party engine
    gets workers (their maintenance pass and wake-ups), cron and pub/sub with no more code."""
    site = tmp_path / "site"
    site.mkdir()
    _install_example(site)
    monkeypatch.syspath_prepend(str(site))
    with alkstore.connect(pg_dsn, engine="lockfree-postgres", schema=schema_name) as store:
        for queue in ("reports", "mail", "audit"):
            store.create_queue(queue)
        store.schedule("reports", "* * * * *", {"report": "daily"})
        store.subscribe("signup", "mail")
        store.subscribe("signup", "audit")
        handled: list[tuple[str, object]] = []
        handled_lock = threading.Lock()

        def handler(job: alkstore.Job) -> str:
            with handled_lock:
                handled.append((job.queue, job.data))
            return "done"

        workers = [store.work(q, handler, poll_interval=0.05) for q in ("reports", "mail")]
        try:
            later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=2)
            assert store.fire_schedules(now=later) == 1
            assert len(store.publish("signup", {"user": 7})) == 2
            [report] = store.list_jobs("reports")
            [mail] = store.list_jobs("mail")
            done = [store.wait(j.queue, j.id, timeout=30) for j in (report, mail)]
        finally:
            for worker in workers:
                worker.stop()
        assert [job.output for job in done] == ["done", "done"]
        assert sorted(handled, key=str) == [("mail", {"user": 7}), ("reports", {"report": "daily"})]
        [audit] = store.list_jobs("audit")
        assert audit.data == {"user": 7}
        assert audit.state == alkstore.JobState.CREATED
