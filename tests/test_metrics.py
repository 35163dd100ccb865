"""Metrics scraped over HTTP from running processes: ``alkstore metrics`` (the queue
collector), a worker process exposing the runtime's registry, and the dashboard's
``/metrics`` (docs/dashboard.md#prometheus)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx

import alkstore
from web_servers import Process, free_port, serving

ROOT = Path(__file__).resolve().parents[1]


def sample(body: str, name: str) -> float:
    """The value of the sample ``name`` (with its labels as exposed) in ``body``."""
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no sample {name} in:\n{body}")


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


def test_metrics_command_serves_the_counters_other_processes_keep(
    pg_dsn: str, schema_name: str
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("dlq")
        store.create_queue("emails", retry_limit=0, dead_letter="dlq")
        store.create_queue("idle")
        store.pause_queue("idle")
        store.schedule("emails", "0 0 1 1 *", key="yearly")
        store.schedule("emails", "* * * * *", key="minutely")
        store._run(store.engine.test_hooks().advance(150))  # no worker fired it since
        store.send_many("emails", [{"data": n} for n in range(3)])
        done, failed = store.fetch("emails", batch_size=2)
        store.complete("emails", done.id)
        store.fail("emails", failed.id, "boom")
        store.maintain()
        port = free_port()
        command = [sys.executable, "-m", "alkstore.cli", "metrics", "--dsn", pg_dsn]
        command += ["--schema", schema_name, "--port", str(port)]
        url = f"http://127.0.0.1:{port}/metrics"
        with serving(command, url=url, env={}, cwd=ROOT):
            body = httpx.get(url, timeout=10).text
            assert sample(body, 'alkstore_jobs_sent_total{queue="emails"}') == 3
            assert sample(body, 'alkstore_jobs_completed_total{queue="emails"}') == 1
            assert sample(body, 'alkstore_jobs_failed_total{queue="emails"}') == 1
            assert sample(body, 'alkstore_jobs_dead_lettered_total{queue="emails"}') == 1
            assert sample(body, 'alkstore_jobs_retried_total{queue="emails"}') == 0
            assert sample(body, 'alkstore_jobs_expired_total{queue="emails"}') == 0
            assert sample(body, 'alkstore_jobs_sent_total{queue="dlq"}') == 1
            assert sample(body, 'alkstore_queue_paused{queue="idle"}') == 1
            assert sample(body, 'alkstore_queue_paused{queue="emails"}') == 0
            lag = sample(body, 'alkstore_schedule_lag_seconds{key="yearly",queue="emails"}')
            assert 150 <= lag < 3600
            overdue = 'alkstore_schedule_overdue_seconds{{key="{}",queue="emails"}}'
            assert sample(body, overdue.format("yearly")) == 0
            assert 60 <= sample(body, overdue.format("minutely")) <= 150
            assert sample(body, "alkstore_counters_updated_timestamp_seconds") > 0
            # What this process counts next, the serving process reads at its next scrape.
            store.send("emails", None)
            store.maintain()
            body = httpx.get(url, timeout=10).text
            assert sample(body, 'alkstore_jobs_sent_total{queue="emails"}') == 4


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


WORKER = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from prometheus_client import start_http_server
    import alkstore
    from alkstore.worker.metrics import REGISTRY

    dsn, schema, port, release = sys.argv[1:]

    def handler(job):
        deadline = time.monotonic() + 60
        while not Path(release).exists():
            assert time.monotonic() < deadline, "never released"
            time.sleep(0.01)

    start_http_server(int(port), addr="127.0.0.1", registry=REGISTRY)
    with alkstore.connect(dsn, schema=schema) as store:
        store.work("emails", handler, poll_interval=0.05)
        threading.Event().wait()  # until the test stops the process
    """
)


def test_a_worker_process_exposes_its_runtime_metrics(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("emails")
        port = free_port()
        release = tmp_path / "release"
        command = [sys.executable, "-c", WORKER, pg_dsn, schema_name, str(port), str(release)]
        url = f"http://127.0.0.1:{port}/metrics"
        process = Process(command, env={}, cwd=ROOT)
        running = 'alkstore_worker_in_flight_handlers{queue="emails"}'
        try:
            process.wait_for(lambda: running in _scraped(url), "the worker's metrics", 60)
            body = httpx.get(url, timeout=10).text
            assert sample(body, 'alkstore_worker_in_flight_handlers{queue="emails"}') == 0
            assert sample(body, 'alkstore_worker_settle_retries_total{queue="emails"}') == 0
            assert sample(body, 'alkstore_worker_fetch_errors_total{queue="emails"}') == 0
            job_id = store.send("emails", None)
            process.wait_for(lambda: _value(url, running) == 1, "a handler in flight", 60)
            release.touch()
            count = 'alkstore_worker_handler_duration_seconds_count{queue="emails"}'
            process.wait_for(lambda: _value(url, count) == 1, "a handler duration", 60)
            assert _value(url, running) == 0
            assert store.wait("emails", job_id, timeout=30).state is alkstore.JobState.COMPLETED
        finally:
            process.stop()


def _scraped(url: str) -> str:
    """What ``url`` serves, or nothing while it does not answer."""
    try:
        return httpx.get(url, timeout=5).text
    except httpx.TransportError:
        return ""


def _value(url: str, name: str) -> float:
    return sample(httpx.get(url, timeout=10).text, name)


def test_the_dashboard_serves_metrics_only_when_asked_and_behind_its_token(
    pg_dsn: str, schema_name: str
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("emails")
        store.send("emails", None)
        store.maintain()
    base = [sys.executable, "-m", "alkstore.cli", "dashboard", "--dsn", pg_dsn]
    base += ["--schema", schema_name]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving([*base, "--port", str(port)], url=url, env={}, cwd=ROOT):
        assert httpx.get(f"{url}/metrics", timeout=10).status_code == 404
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [*base, "--port", str(port), "--metrics", "--token", "s3cret"]
    with serving(command, url=url, env={}, cwd=ROOT):
        assert httpx.get(f"{url}/metrics", timeout=10).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert httpx.get(f"{url}/metrics", headers=wrong, timeout=10).status_code == 401
        bearer = {"Authorization": "Bearer s3cret"}
        scraped = httpx.get(f"{url}/metrics", headers=bearer, timeout=10)
        assert scraped.status_code == 200
        assert scraped.headers["content-type"].startswith("text/plain")
        assert sample(scraped.text, 'alkstore_jobs_sent_total{queue="emails"}') == 1
        assert sample(scraped.text, 'alkstore_jobs{queue="emails",state="created"}') == 1
