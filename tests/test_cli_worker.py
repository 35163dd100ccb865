"""``alkstore worker``: a real process on the run's PostgreSQL, stopped by real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import alkstore
from alkstore import JobState
from alkstore.cli.worker import INTERRUPTED, load_handler

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


def test_a_bad_handler_spec_is_named():
    with pytest.raises(ValueError, match=r"pkg\.module:function"):
        load_handler("no_colon")
    with pytest.raises(ValueError, match="has no nothing"):
        load_handler("os:nothing")
