"""``alkstore worker``: a real process on the run's PostgreSQL, stopped by real signals."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

import alkstore
from alkstore import JobState
from alkstore.cli.worker import BAD_TARGET, INTERRUPTED, load_target

HANDLERS = textwrap.dedent(
    """
    import time

    def handle(job):
        # The job's data is how long the work takes (workload, not synchronisation).
        time.sleep(job.data)
        return {"slept": job.data}
    """
)


def _eventually(check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture
def worker_process(tmp_path: Path, pg_dsn: str, schema_name: str):
    (tmp_path / "cli_handlers.py").write_text(HANDLERS)
    store = alkstore.connect(pg_dsn, schema=schema_name)
    store.create_queue("q", retry_limit=0)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    command = [
        sys.executable,
        "-m",
        "alkstore.cli",
        "worker",
        "cli_handlers:handle",
        "--queue",
        "q",
        "--dsn",
        pg_dsn,
        "--schema",
        schema_name,
        "--concurrency",
        "2",
        "--poll-interval",
        "0.05",
    ]
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        yield store, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        store.close()


def test_sigterm_drains_the_running_job(worker_process):
    store, proc = worker_process
    quick = store.send("q", 0)
    _eventually(lambda: store.get_job("q", quick).state is JobState.COMPLETED)
    slow = store.send("q", 1.5)
    _eventually(lambda: store.get_job("q", slow).state is JobState.ACTIVE)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    job = store.get_job("q", slow)
    assert job.state is JobState.COMPLETED and job.output == {"slept": 1.5}
    assert "draining" in proc.stderr.read()


def test_a_second_signal_exits_at_once(worker_process):
    store, proc = worker_process
    slow = store.send("q", 60)
    _eventually(lambda: store.get_job("q", slow).state is JobState.ACTIVE)
    proc.send_signal(signal.SIGINT)
    _eventually(lambda: "draining" in (proc.stderr.readline() or ""))
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == INTERRUPTED
    assert store.get_job("q", slow).state is JobState.ACTIVE


def _workers(pg_dsn: str, schema_name: str, *output: str) -> str:
    """``alkstore workers`` as a pipeline runs it: its stdout."""
    command = [sys.executable, "-m", "alkstore.cli", "workers", *output]
    done = subprocess.run(
        [*command, "--dsn", pg_dsn, "--schema", schema_name],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout


def test_workers_lists_the_running_worker_process_until_it_stops(
    worker_process, pg_dsn, schema_name
):
    store, proc = worker_process
    job = store.send("q", 0)
    _eventually(lambda: store.get_job("q", job).state is JobState.COMPLETED)
    _eventually(lambda: json.loads(_workers(pg_dsn, schema_name, "--json")) != [])
    (listed,) = json.loads(_workers(pg_dsn, schema_name, "--json"))
    assert (listed["pid"], listed["queues"], listed["workers"]) == (proc.pid, ["q"], 1)
    table = _workers(pg_dsn, schema_name)
    assert str(proc.pid) in table and listed["host"] in table
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    assert json.loads(_workers(pg_dsn, schema_name, "--json")) == []  # forgotten at its stop
    assert "no process runs workers" in _workers(pg_dsn, schema_name)


def test_a_bad_target_spec_is_named():
    with pytest.raises(ValueError, match=r"pkg\.module:function"):
        load_target("no_colon")
    with pytest.raises(ValueError, match="has no nothing"):
        load_target("os:nothing")
    with pytest.raises(ValueError, match="neither a Tasks registry nor a function"):
        load_target("os:sep")


APP = textwrap.dedent(
    """
    import asyncio

    import alkstore

    tasks = alkstore.Tasks()


    @tasks.task(queue="app-add", retry_limit=0)
    def add(a: int, b: int) -> int:
        return a + b


    @tasks.task(queue="app-greet", retry_limit=0)
    async def greet(name: str) -> str:
        await asyncio.sleep(0)
        return "hello " + name


    @tasks.task(queue="app-boom", retry_limit=0)
    async def boom() -> None:
        raise RuntimeError("kaboom")


    @tasks.task(queue="app-idle")
    def idle() -> None: ...


    async def handle(job):
        await asyncio.sleep(0)
        return {"async": job.data}
    """
)


def _worker(tmp_path: Path, pg_dsn: str, schema: str, *args: str) -> subprocess.Popen[str]:
    """``alkstore worker`` started in ``tmp_path`` (no PYTHONPATH) with ``$ALKSTORE_DSN``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ALKSTORE_DSN"] = pg_dsn
    command = [sys.executable, "-m", "alkstore.cli", "worker", *args, "--schema", schema]
    return subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def app(tmp_path: Path, pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch):
    module = f"cli_app_{schema_name}"
    (tmp_path / f"{module}.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        yield store, importlib.import_module(module), module


def _settled(store, queue, job_id, state):
    return lambda: store.get_job(queue, job_id).state is state


def test_a_registry_runs_sync_and_async_tasks_from_the_current_directory(
    app, tmp_path, pg_dsn, schema_name
):
    store, tasks_module, module = app
    added = tasks_module.add.send(store, 1, 2)
    greeted = tasks_module.greet.send(store, "cli")
    failed = tasks_module.boom.send(store)
    waiting = tasks_module.idle.send(store)
    queues = "app-add,app-greet,app-boom"
    proc = _worker(
        tmp_path, pg_dsn, schema_name, f"{module}:tasks", "--queues", queues, "--log-format", "json"
    )
    try:
        _eventually(_settled(store, "app-add", added, JobState.COMPLETED))
        _eventually(_settled(store, "app-greet", greeted, JobState.COMPLETED))
        _eventually(_settled(store, "app-boom", failed, JobState.FAILED))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert store.get_job("app-add", added).output == 3
    assert store.get_job("app-greet", greeted).output == "hello cli"
    assert store.get_job("app-idle", waiting).state is JobState.CREATED  # not in --queues
    records = [json.loads(line) for line in proc.stderr.read().splitlines() if line]
    (failure,) = [r for r in records if r.get("alkstore_event") == "handler_failed"]
    assert failure["level"] == "WARNING" and failure["queue"] == "app-boom"
    assert "Traceback" in failure["message"] and "kaboom" in failure["message"]


def test_an_async_handler_runs_on_a_queue(app, tmp_path, pg_dsn, schema_name):
    store, _, module = app
    store.create_queue("plain")
    job_id = store.send("plain", 7)
    proc = _worker(
        tmp_path,
        pg_dsn,
        schema_name,
        f"{module}:handle",
        "--queue",
        "plain",
        "--poll-interval",
        "0.05",
    )
    try:
        _eventually(_settled(store, "plain", job_id, JobState.COMPLETED))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert store.get_job("plain", job_id).output == {"async": 7}


def test_a_missing_schema_is_reported_not_installed(tmp_path, pg_dsn, schema_name):
    (tmp_path / "empty_app.py").write_text("import alkstore\ntasks = alkstore.Tasks()\n")
    proc = _worker(tmp_path, pg_dsn, schema_name, "empty_app:tasks")
    assert proc.wait(60) == 1
    (line,) = proc.stderr.read().strip().splitlines()[-1:]
    assert "is not installed" in line and "alkstore migrate" in line
    with psycopg.connect(pg_dsn) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema_name,)
        ).fetchone()
    assert found is None


def test_an_import_failure_is_one_line(tmp_path, pg_dsn, schema_name):
    (tmp_path / "broken_app.py").write_text("import not_a_module_anywhere\n")
    proc = _worker(tmp_path, pg_dsn, schema_name, "broken_app:tasks")
    assert proc.wait(60) == BAD_TARGET
    lines = proc.stderr.read().strip().splitlines()
    assert len(lines) == 1, lines
    assert "cannot import broken_app: ModuleNotFoundError" in lines[0]
