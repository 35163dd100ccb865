"""``alkstore metrics`` serving the queue collector, scraped over HTTP from a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

import alkstore


def test_metrics_command_serves_queue_stats(pg_dsn: str, schema_name: str) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("emails")
        store.send_many("emails", [{"data": n} for n in range(3)])
        store.fetch("emails")
    command = [sys.executable, "-m", "alkstore.cli", "metrics", "--dsn", pg_dsn]
    command += ["--schema", schema_name, "--port", "0"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "serving metrics on http://127.0.0.1:PORT/metrics"
        assert line.startswith("serving metrics on "), line
        url = line.split()[-1]
        body = httpx.get(url, timeout=10).text  # it listens before printing its address
        assert 'alkstore_jobs{queue="emails",state="created"} 2.0' in body
        assert 'alkstore_jobs{queue="emails",state="active"} 1.0' in body
        assert 'alkstore_jobs{queue="emails",state="failed"} 0.0' in body
        oldest = next(
            ln for ln in body.splitlines() if ln.startswith("alkstore_oldest_queued_seconds{")
        )
        assert 'queue="emails"' in oldest and float(oldest.split()[-1]) >= 0
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_metrics_command_refuses_json(pg_dsn: str, schema_name: str) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name):
        pass
    result = subprocess.run(
        [sys.executable, "-m", "alkstore.cli", "metrics", "--dsn", pg_dsn, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and "--json does not apply" in result.stderr
