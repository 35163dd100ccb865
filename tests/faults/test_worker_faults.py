"""The worker runtime under faults (issue 29): a settle that meets a dead or refused
connection is retried, so no handler runs twice after it returned; a dead fetch connection
is replaced at once, not at the next poll; a late handler's result stays fenced."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from faultkit import record_worker_cell, terminate_store_backends, wait_for
from proxy import FaultProxy

import alkstore
from alkstore import ConnectionFailed, ConnectionLost, JobState
from alkstore.cli.worker import FORCED
from alkstore.conformance.cluster import TempCluster
from alkstore.worker import WorkerEvent

SCALE = int(os.environ.get("ALKSTORE_FAULT_SCALE", "1"))
"""A longer local run multiplies the jobs of the storm, restart and kill -9 cells by this."""
FACES = ("psycopg", "psycopg-async", "asyncpg", "pg8000")
"""A driver variant each: the thread shell (sync drivers) and the task shell (async)."""


def _schema() -> str:
    return f"w_{uuid.uuid4().hex[:12]}"


def _driver(face: str) -> str:
    return "psycopg" if face == "psycopg-async" else face


def _run_worker(
    dsn: str,
    face: str,
    handler: Callable[[Any], Any],
    check: Callable[[Any, Any], None],
    sent: list[uuid.UUID] | None = None,
    expire: int = 8,
    **work: Any,
) -> list[WorkerEvent]:
    """Open a store on ``face``, create queue ``q`` (expiring after ``expire`` s), send ten
    (times :data:`SCALE`) jobs first when ``sent`` is given (their ids go there), start a
    worker with ``handler`` and call ``check(store, worker)`` (in a thread for the async
    face: it may block); the worker's events."""
    events: list[WorkerEvent] = []
    work = {"on_event": events.append, "maintenance_interval": 0.2, **work}
    schema = _schema()
    if face in ("psycopg", "pg8000"):
        store = alkstore.connect(dsn, driver=face, schema=schema)
        try:
            store.create_queue("q", expire_seconds=expire)
            if sent is not None:
                sent.extend(store.send("q", {"n": n}) for n in range(10 * SCALE))
            with store.work("q", handler, **work) as worker:
                check(store, worker)
        finally:
            store.close()
        return events

    async def main() -> None:
        async with alkstore.connect_async(dsn, driver=_driver(face), schema=schema) as store:
            await store.create_queue("q", expire_seconds=expire)
            if sent is not None:
                sent.extend([await store.send("q", {"n": n}) for n in range(10 * SCALE)])
            async with await store.work("q", handler, **work) as worker:
                await asyncio.to_thread(check, _SyncView(store, asyncio.get_running_loop()), worker)

    asyncio.run(main())
    return events


class _SyncView:
    """An async store's calls, run on its loop from another thread."""

    def __init__(self, store: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._store = store
        self._loop = loop

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(method(*args, **kwargs), self._loop)
            return future.result(timeout=30)

        return call


def _tally(store: Any, ids: list[uuid.UUID], returned: list[uuid.UUID]) -> dict[str, int]:
    """Sent, completed, lost (not stored) and reruns (returns beyond one a job) of a cell."""
    states = [_state(store, i) for i in ids]
    return {
        "sent": len(ids),
        "completed": sum(state is JobState.COMPLETED for state in states),
        "lost": sum(store.get_job("q", i) is None for i in ids),
        "reruns": len(returned) - len(set(returned)),
    }


def _tallied_once_all_complete(
    ids: list[uuid.UUID], returned: list[uuid.UUID], tally: dict[str, int], seconds: float
) -> Callable[[Any, Any], None]:
    """A cell's check: wait (up to ``seconds``) until every job of ``ids`` completed, then
    fill ``tally`` with the cell's counts and the worker's retried settles."""

    def check(store: Any, worker: Any) -> None:
        wait_for(
            lambda: all(_state(store, i) is JobState.COMPLETED for i in ids),
            "every completion",
            seconds,
        )
        tally.update(_tally(store, ids, returned), retried=worker.settle_retries)

    return check


def _state(store: Any, job_id: uuid.UUID) -> JobState | None:
    """The job's state; None when the read itself met the fault."""
    try:
        job = store.get_job("q", job_id)
    except (ConnectionFailed, ConnectionLost):
        return None
    assert job is not None
    state: JobState = job.state
    return state


@pytest.mark.parametrize("face", FACES)
def test_a_settle_refused_by_a_server_that_is_down_is_retried(
    fault_cluster: TempCluster, face: str
) -> None:
    """The handler returns, then the server refuses every connection until the worker saw
    its settle fail: the completion is retried until it lands; the handler never runs
    again."""
    with FaultProxy("127.0.0.1", fault_cluster.port) as proxy:
        returned: list[uuid.UUID] = []
        events: list[WorkerEvent] = []

        def handler(job: Any) -> None:
            if not returned:
                proxy.refuse()
            returned.append(job.id)  # the handler's last act: it has returned

        def on_event(event: WorkerEvent) -> None:
            events.append(event)
            if event.kind in ("settle_retry", "settle_error"):
                proxy.admit()  # the server is back once the settle met it down

        def check(store: Any, worker: Any) -> None:
            # The send goes through the proxy too, and the worker, woken by its commit, may
            # refuse before the send's reply has reached this client: then the send's outcome
            # is unknown (ConnectionLost) though it committed. Its id is chosen here.
            job_id = uuid.uuid4()
            with contextlib.suppress(ConnectionLost):
                store.send("q", {"n": 1}, id=job_id)
            wait_for(lambda: _state(store, job_id) is JobState.COMPLETED, "the completion", 15)
            assert returned == [job_id]
            assert worker.settle_retries >= 1

        _run_worker(proxy.dsn(fault_cluster.dsn), face, handler, check, on_event=on_event)
    assert any(e.kind == "settle_retry" for e in events)
    assert not [e for e in events if e.kind == "settle_error"]


@pytest.mark.parametrize("face", FACES)
def test_settles_cut_by_a_terminate_storm_never_rerun_a_returned_handler(
    fault_cluster: TempCluster, admin: psycopg.Connection[Any], face: str
) -> None:
    """Every handler call terminates the store's backends as it returns (its completion and
    the next claim meet dead connections): every job completes once, no handler that returned
    runs again."""
    with FaultProxy("127.0.0.1", fault_cluster.port) as proxy:
        returned: list[uuid.UUID] = []
        lock = threading.Lock()
        ids: list[uuid.UUID] = []

        def handler(job: Any) -> None:
            with lock:
                proxy.cut()
                returned.append(job.id)

        tally: dict[str, int] = {}
        check = _tallied_once_all_complete(ids, returned, tally, 20)

        started = time.monotonic()
        dsn = proxy.dsn(fault_cluster.dsn)
        events = _run_worker(dsn, face, handler, check, ids, concurrency=2)
    seconds = time.monotonic() - started
    record_worker_cell("work: cut as handlers return", face, tally, events, seconds)
    assert sorted(returned) == sorted(ids)  # each handler returned once
    assert any(e.kind == "settle_retry" for e in events)


@pytest.fixture(scope="module")
def restart_cluster() -> Iterator[TempCluster]:
    """A cluster of its own, restarted by the tests (durable commits, as in the matrix)."""
    with TempCluster(max_connections=100, settings={"synchronous_commit": "on"}) as cluster:
        yield cluster


@pytest.mark.parametrize("face", FACES)
def test_a_restart_immediate_as_handlers_return_reruns_none(
    restart_cluster: TempCluster, face: str
) -> None:
    """The fifth handler call restarts the server (``-m immediate``) as it returns: every job
    completes, none whose handler returned runs again; the settles met the restart and were
    retried (their count is in the worker's settle_retries)."""
    returned: list[uuid.UUID] = []
    ids: list[uuid.UUID] = []
    lock = threading.Lock()
    restarts: list[threading.Thread] = []

    def handler(job: Any) -> None:
        with lock:
            if len(returned) == 4:
                restarts.append(threading.Thread(target=restart_cluster.restart_immediate))
                restarts[0].start()
                wait_for(lambda: not _accepting(restart_cluster.dsn), "the server to go down")
            returned.append(job.id)

    tally: dict[str, int] = {}
    check = _tallied_once_all_complete(ids, returned, tally, 40)

    started = time.monotonic()
    events = _run_worker(restart_cluster.dsn, face, handler, check, ids, expire=60, concurrency=2)
    for thread in restarts:
        thread.join(30)
    seconds = time.monotonic() - started
    record_worker_cell("work: restart -m immediate", face, tally, events, seconds)
    assert sorted(returned) == sorted(ids)  # each handler returned once
    assert tally["retried"] >= 1
    assert not [e for e in events if e.kind == "settle_error"]


def _accepting(dsn: str) -> bool:
    try:
        psycopg.connect(dsn, connect_timeout=1).close()
    except psycopg.OperationalError:
        return False
    return True


@pytest.mark.parametrize("face", FACES)
def test_a_dead_fetch_connection_is_replaced_before_the_next_poll(
    fault_cluster: TempCluster, admin: psycopg.Connection[Any], face: str
) -> None:
    """poll_interval=60: after every connection of the store was terminated, a job sent
    (which wakes the worker) runs within seconds, not at the next poll."""
    done: list[uuid.UUID] = []

    def check(store: Any, worker: Any) -> None:
        first = store.send("q", {"n": 0})
        wait_for(lambda: first in done, "the first job")
        terminate_store_backends(admin)
        second = store.send("q", {"n": 1})
        wait_for(lambda: second in done, "the job sent after the terminations", 10)

    _run_worker(fault_cluster.dsn, face, lambda job: done.append(job.id), check, poll_interval=60)


@pytest.mark.parametrize("face", ("psycopg", "asyncpg"))
def test_a_handler_that_outlives_stop_is_dropped_quietly(
    fault_cluster: TempCluster, face: str
) -> None:
    """stop(0.2) fails the job of a handler that ignores ctx.cancelled as WorkerStopped; when
    it returns later (its store closed) nothing is settled or reported as an error."""
    release = threading.Event()
    started = threading.Event()
    events: list[WorkerEvent] = []
    finished = threading.Event()

    def handler(job: Any) -> None:
        started.set()
        release.wait(20)
        finished.set()

    async def slow(job: Any) -> None:
        started.set()
        await asyncio.to_thread(release.wait, 20)  # deaf to cancellation: a thread
        finished.set()

    schema = _schema()
    if face == "psycopg":
        store = alkstore.connect(fault_cluster.dsn, schema=schema)
        store.create_queue("q")
        job_id = store.send("q", {})
        worker = store.work("q", handler, on_event=events.append)
        wait_for(started.is_set, "the handler to start")
        worker.stop(0.2)
        store.close()
        release.set()
        wait_for(finished.is_set, "the handler to return")
        time.sleep(0)  # the settle, if any, runs in the handler's thread right after
        wait_for(lambda: any(e.kind == "late_return" for e in events), "the late return")
        with alkstore.connect(fault_cluster.dsn, schema=schema) as reader:
            job = reader.get_job("q", job_id)
    else:

        async def main() -> Any:
            async with alkstore.connect_async(
                fault_cluster.dsn, driver="asyncpg", schema=schema
            ) as store:
                await store.create_queue("q")
                job_id = await store.send("q", {})
                worker = await store.work("q", slow, on_event=events.append)
                await asyncio.to_thread(wait_for, started.is_set, "the handler to start")
                await worker.stop(0.2)
                return await store.get_job("q", job_id)

        job = asyncio.run(main())
        release.set()
    assert job is not None and job.state is JobState.RETRY
    assert job.output["name"] == "WorkerStopped"
    assert not [e for e in events if e.kind in ("settle_error", "handler_failed")]


DEAF = """
import time

def handle(job):
    print("started", flush=True)
    time.sleep(30)  # deaf to ctx.cancelled
"""


def test_the_cli_exits_at_its_stop_timeout_with_a_deaf_handler(
    fault_cluster: TempCluster, tmp_path: Path
) -> None:
    """SIGTERM with ``--stop-timeout 1`` while a sync handler sleeps 30 s ignoring
    cancellation: the process ends within seconds with :data:`FORCED`, its job failed as
    WorkerStopped (it retries), and no ERROR is logged."""
    (tmp_path / "deaf_handlers.py").write_text(DEAF)
    schema = _schema()
    with alkstore.connect(fault_cluster.dsn, schema=schema) as store:
        store.create_queue("q")
        job_id = store.send("q", {})
        command = [
            *(sys.executable, "-m", "alkstore.cli", "worker", "deaf_handlers:handle"),
            *("--queue", "q", "--dsn", fault_cluster.dsn, "--schema", schema),
            *("--stop-timeout", "1", "--poll-interval", "0.05"),
        ]
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        proc = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "started"
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=15)  # the handler alone would take 30 s
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert proc.returncode == FORCED, stderr
        assert " ERROR " not in stderr and "pool is closed" not in stderr, stderr
        job = store.get_job("q", job_id)
        assert job is not None and job.state is JobState.RETRY
        assert job.output["name"] == "WorkerStopped"


RECORDING = """
import os
import time

def handle(job):
    time.sleep(0.2)
    with open(os.environ["RETURNED"], "a") as out:  # the handler's last act
        out.write(f"{job.id} {os.getpid()}\\n")
"""


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_kill_9_of_cli_workers_reruns_no_handler_of_a_live_worker(
    fault_cluster: TempCluster, tmp_path: Path
) -> None:
    """Three ``alkstore worker`` processes drain 120 jobs while one is killed with SIGKILL
    (and replaced) three times: nothing lost or stuck, and no job whose handler returned in
    a process that was not killed runs again (a killed process's return may not have been
    settled: that job rightly runs again)."""
    (tmp_path / "recording_handlers.py").write_text(RECORDING)
    returned = tmp_path / "returned.txt"
    schema = _schema()
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "RETURNED": str(returned)}
    command = [
        *(sys.executable, "-m", "alkstore.cli", "worker", "recording_handlers:handle"),
        *("--queue", "q", "--dsn", fault_cluster.dsn, "--schema", schema),
        *("--concurrency", "4", "--poll-interval", "0.2", "--stop-timeout", "5"),
    ]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)

    with alkstore.connect(fault_cluster.dsn, schema=schema) as store:
        store.create_queue("q", expire_seconds=3)
        ids = [store.send("q", {"n": n}) for n in range(120 * SCALE)]
        started = time.monotonic()
        procs = [start() for _ in range(3)]
        killed: set[int] = set()
        try:
            for kill in range(3):
                lines = 15 * (kill + 1)
                wait_for(lambda n=lines: _lines(returned) >= n, f"{lines} returns", 30)
                victim = procs.pop(0)
                victim.kill()
                assert _lines(returned) < len(ids)  # mid-drain
                victim.wait(10)
                killed.add(victim.pid)
                procs.append(start())
            wait_for(
                lambda: all(_state(store, i) is JobState.COMPLETED for i in ids),
                "every job to complete",
                90,
            )
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        runs: dict[uuid.UUID, list[int]] = {}
        for line in returned.read_text().splitlines():
            job, pid = line.split()
            runs.setdefault(uuid.UUID(job), []).append(int(pid))
        reruns = [job for job, pids in runs.items() if len(pids) > 1 and pids[0] not in killed]
        tally = {**_tally(store, ids, []), "reruns": len(reruns)}
        seconds = time.monotonic() - started
        record_worker_cell("alkstore worker: kill -9 x3", "psycopg", tally, [], seconds)
        assert sorted(runs) == sorted(ids)  # nothing lost, each handler returned
        assert reruns == []
