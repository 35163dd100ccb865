"""The fault matrix (issue 13, item 6): each fault x each driver, invariants from job ids.

Each scenario sends jobs with ids of its own (so a send whose outcome was unknown is retried
safely: a JobConflict then proves the first attempt committed), drains them with
fetch + complete (a Job fences its complete to its attempt, so a retried complete is safe),
while a fault is injected from another thread. Then the fault stops and the jobs are driven
to the end the way an operator's process would: time passes beyond their expiry (the test
hook moves the stored timestamps), ``maintain()`` expires the stranded ones, a drain finishes
them. Checked for every scenario:

- nothing lost: every id whose send returned (or conflicted) is stored;
- nothing completed twice: no id's ``complete`` succeeded twice;
- nothing stuck: every such id ends completed;
- no call outlives its deadline; every error that reached the caller is an alkstore type.

The table (fault x driver -> sent / completed / lost / duplicated / stuck / error types) is
printed at the end of the run (see conftest's terminal summary).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from faultkit import RESULTS, VARIANTS, open_store
from proxy import FaultProxy

from alkstore import AlkstoreError, JobConflict, JobState
from alkstore.conformance.cluster import TempCluster
from alkstore.conformance.harness import StoreHandle
from alkstore.drivers import variant as variant_spec
from alkstore.drivers.base import DriverSpec
from alkstore.drivers.common import resolve_timeouts

SCALE = int(os.environ.get("ALKSTORE_FAULT_SCALE", "1"))
"""A longer local run multiplies the jobs and the faults of every scenario by this."""
JOBS = 40 * SCALE
"""Jobs per scenario: enough for faults to land mid-send and mid-drain, few for the clock."""
TIMEOUTS: dict[str, float] = {"statement_timeout": 1.0, "lock_timeout": 1.0, "connect_timeout": 2}
"""Short deadlines, so a stalled call ends quickly."""
SLACK = 2.0
"""Seconds a call may end after its deadline on a loaded 2-core machine."""
EXPIRE = 30
"""The queue's expire_seconds: time is advanced past it to strand nothing."""
STORM_ROUNDS = 4 * SCALE
"""Terminations or cuts per storm scenario, half a second apart, all mid-workload."""


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _deadline() -> float:
    options = {k: v for k, v in TIMEOUTS.items() if k != "connect_timeout"}
    call = resolve_timeouts("", connect_timeout=None, server_side=True, **options).call
    assert call is not None
    return call


class Ledger:
    """What the client saw: ids sent, completions that succeeded, errors, slowest call."""

    def __init__(self) -> None:
        self.sent: list[uuid.UUID] = []
        self.completions: Counter[uuid.UUID] = Counter()
        self.errors: Counter[str] = Counter()
        self.slowest = 0.0

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(...)``, timed; an alkstore error is counted and returned, anything else fails."""
        started = time.monotonic()
        try:
            return fn(*args, **kwargs)
        except AlkstoreError as exc:
            if not isinstance(exc, JobConflict):
                self.errors[type(exc).__name__] += 1
            return exc
        except Exception as exc:  # a raw driver error reached the caller: the bug we hunt
            self.errors[f"RAW {type(exc).__name__}"] += 1
            return exc
        finally:
            self.slowest = max(self.slowest, time.monotonic() - started)

    def send(self, store: StoreHandle, n: int, until: float) -> None:
        job_id = uuid.uuid4()
        while time.monotonic() < until:
            result = self.call(store.send, "q", {"n": n}, id=job_id)
            if result == job_id or isinstance(result, JobConflict):
                self.sent.append(job_id)
                return
            # ConnectionFailed: nothing happened; ConnectionLost: maybe it did, and the
            # retry with the same id tells (JobConflict). Either way: send again.
        pytest.fail(f"send {n} never succeeded: {self.errors}")

    def drain(self, store: StoreHandle, until: float) -> None:
        """Fetch and complete until a fetch comes back empty (or the deadline)."""
        while time.monotonic() < until:
            jobs = self.call(store.fetch, "q", batch_size=5)
            if isinstance(jobs, Exception):
                continue  # claimed jobs, if any, come back after expiry + maintain
            if not jobs:
                return
            for job in jobs:
                while time.monotonic() < until:
                    done = self.call(store.complete, "q", job)
                    if isinstance(done, int):
                        if done:
                            self.completions[job.id] += 1
                        break


@contextmanager
def _in_background(fault: Callable[[threading.Event], None]) -> Iterator[threading.Thread]:
    """Run ``fault`` (it returns once it injected its faults, or when told to stop)."""
    stop = threading.Event()
    thread = threading.Thread(target=fault, args=(stop,), daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(timeout=30)


def _settle(store: StoreHandle, ledger: Ledger) -> dict[str, int]:
    """Let time pass beyond expiry, maintain, drain; until nothing is left or the deadline.
    The row counts of the table."""
    until = time.monotonic() + 30
    states: dict[uuid.UUID, str] = {}
    while time.monotonic() < until:
        ledger.drain(store, until)
        store.advance(EXPIRE + 1)
        store.maintain()
        ledger.drain(store, until)
        states = {row["id"]: str(row["state"]) for row in store.job_rows()}
        if all(states.get(i) == JobState.COMPLETED for i in ledger.sent):
            break
    lost = [i for i in ledger.sent if i not in states]
    stuck = [i for i in ledger.sent if i in states and states[i] != JobState.COMPLETED]
    return {
        "sent": len(ledger.sent),
        "completed": sum(1 for i in ledger.sent if states.get(i) == JobState.COMPLETED),
        "lost": len(lost),
        "duplicated": sum(1 for n in ledger.completions.values() if n > 1),
        "stuck": len(stuck),
    }


def _run(fault_name: str, variant: str, dsn: str, fault: Callable[[threading.Event], None]) -> None:
    schema = f"m_{uuid.uuid4().hex[:12]}"
    store = open_store(dsn, variant, schema, **TIMEOUTS)
    ledger = Ledger()
    started = time.monotonic()
    try:
        store.create_queue("q", expire_seconds=EXPIRE, retry_limit=1000, retry_delay=0)
        until = time.monotonic() + 60
        with _in_background(fault) as injecting:
            # At least JOBS jobs, and on until every fault has landed mid-workload.
            n = 0
            while (n < JOBS or injecting.is_alive()) and time.monotonic() < until:
                ledger.send(store, n, until)
                if n % 4 == 3:
                    ledger.drain(store, until)
                n += 1
            ledger.drain(store, until)
        counts = _settle(store, ledger)
        row = {"fault": fault_name, "driver": variant, **counts}
        row["errors"] = ", ".join(f"{k} x{v}" for k, v in sorted(ledger.errors.items())) or "-"
        row["slowest"] = ledger.slowest
        row["seconds"] = time.monotonic() - started
        RESULTS.append(row)
        assert counts["lost"] == 0, row
        assert counts["duplicated"] == 0, row
        assert counts["stuck"] == 0, row
        assert counts["sent"] >= JOBS and counts["completed"] == counts["sent"], row
        assert not any(k.startswith("RAW") for k in ledger.errors), row
        assert ledger.slowest < _deadline() + SLACK, row
    finally:
        store.close()


# --- the faults --------------------------------------------------------------------------


def test_terminate_backend_storm(
    fault_cluster: TempCluster, admin: psycopg.Connection[Any], variant: str
) -> None:
    def storm(stop: threading.Event) -> None:
        for _ in range(STORM_ROUNDS):  # twice a second (the rate)
            if stop.wait(0.5):
                return
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'alkstore'"
            )

    _run("terminate storm (2/s)", variant, fault_cluster.dsn, storm)


def test_proxy_cuts_connections(fault_cluster: TempCluster, variant: str) -> None:
    assert fault_cluster.port is not None
    with FaultProxy("127.0.0.1", fault_cluster.port) as proxy:

        def cutter(stop: threading.Event) -> None:
            for _ in range(STORM_ROUNDS):
                if stop.wait(0.5):
                    return
                proxy.cut()

        _run("proxy cuts (2/s)", variant, proxy.dsn(fault_cluster.dsn), cutter)


def test_proxy_stalls_connections(fault_cluster: TempCluster, variant: str) -> None:
    assert fault_cluster.port is not None
    with FaultProxy("127.0.0.1", fault_cluster.port) as proxy:

        def staller(stop: threading.Event) -> None:
            stalls = 0
            while stalls < 1 and not stop.wait(0.3):
                proxy.stall()
                stop.wait(_deadline() + 0.5)  # long enough for a call to hit its deadline
                proxy.cut()  # the stalled connections are abandoned by then; drop them
                proxy.resume()
                stalls += 1

        _run("proxy stall", variant, proxy.dsn(fault_cluster.dsn), staller)


@pytest.fixture(scope="module")
def restart_cluster() -> Iterator[TempCluster]:
    """A cluster of its own: restarting it must not disturb the other scenarios."""
    # Durable commits: the throwaway default (synchronous_commit=off) may lose the last
    # commits in a crash, which is the server's choice, not alkstore's to test.
    with TempCluster(max_connections=100, settings={"synchronous_commit": "on"}) as cluster:
        yield cluster


def test_server_restart_immediate(restart_cluster: TempCluster, variant: str) -> None:
    def restart(stop: threading.Event) -> None:
        if not stop.wait(0.3):
            restart_cluster.restart_immediate()

    _run("restart -m immediate", variant, restart_cluster.dsn, restart)


# --- processes ---------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys, time, asyncio
    import alkstore
    dsn, driver, schema, is_async = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    async def main_async():
        store = await alkstore.connect_async(dsn, driver=driver, schema=schema)
        jobs = await store.fetch("q", batch_size=5)
        print(len(jobs), flush=True)
        await asyncio.sleep(3600)  # holds its jobs until killed
    def main():
        store = alkstore.connect(dsn, driver=driver, schema=schema)
        jobs = store.fetch("q", batch_size=5)
        print(len(jobs), flush=True)
        time.sleep(3600)  # holds its jobs until killed
    asyncio.run(main_async()) if is_async else main()
    """
)


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_kill_9_of_workers_mid_job(fault_cluster: TempCluster) -> None:
    """One worker process per driver fetches jobs and is killed -9 holding them; all start
    at once (a Python process takes seconds to start on a loaded machine)."""
    started = time.monotonic()
    runs = []
    for variant in VARIANTS:
        spec: DriverSpec = variant_spec(variant)
        schema = f"k_{uuid.uuid4().hex[:12]}"
        store = open_store(fault_cluster.dsn, variant, schema, **TIMEOUTS)
        store.create_queue("q", expire_seconds=EXPIRE, retry_limit=1000, retry_delay=0)
        ledger = Ledger()
        until = time.monotonic() + 60
        for n in range(JOBS):
            ledger.send(store, n, until)
        flag = "1" if spec.is_async else "0"
        runs.append(
            (variant, store, ledger, _spawn(WORKER, fault_cluster.dsn, spec.name, schema, flag))
        )
    try:
        for _variant, _store, _ledger, worker in runs:
            assert worker.stdout is not None
            line = worker.stdout.readline()  # blocks until it holds its jobs (or dies)
            assert line.strip() == "5", worker.stderr.read() if worker.stderr else line
    finally:
        for *_, worker in runs:
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
    try:
        for variant, store, ledger, _worker in runs:
            counts = _settle(store, ledger)
            row = {"fault": "kill -9 of a worker", "driver": variant, **counts}
            row["errors"] = ", ".join(f"{k} x{v}" for k, v in sorted(ledger.errors.items())) or "-"
            row["slowest"] = ledger.slowest
            row["seconds"] = time.monotonic() - started
            RESULTS.append(row)
            expected = {"sent": JOBS, "completed": JOBS, "lost": 0, "duplicated": 0, "stuck": 0}
            assert counts == expected, row
    finally:
        for _variant, store, _ledger, _worker in runs:
            store.close()


INSTALLER = textwrap.dedent(
    """
    import sys, asyncio
    import alkstore
    dsn, driver, schema, is_async = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    async def main_async():
        async with alkstore.connect_async(dsn, driver=driver, schema=schema) as store:
            print(await store.schema_version(), flush=True)
    def main():
        with alkstore.connect(dsn, driver=driver, schema=schema) as store:
            print(store.schema_version(), flush=True)
    asyncio.run(main_async()) if is_async else main()
    """
)


def test_twenty_processes_install_at_once(fault_cluster: TempCluster) -> None:
    """Twenty processes, the drivers in turn, all connect (and so migrate) one new schema."""
    from alkstore.engines.postgres.schema import LATEST

    schema = f"i_{uuid.uuid4().hex[:12]}"
    started = time.monotonic()
    procs = []
    for n in range(20):
        spec = variant_spec(VARIANTS[n % len(VARIANTS)])
        flag = "1" if spec.is_async else "0"
        procs.append((spec.name, _spawn(INSTALLER, fault_cluster.dsn, spec.name, schema, flag)))
    outcomes: Counter[str] = Counter()
    for _name, proc in procs:
        out, err = proc.communicate(timeout=120)
        failed = f"exit {proc.returncode}: {err[-300:]}"
        outcomes[out.strip() if proc.returncode == 0 else failed] += 1
    RESULTS.append(
        {
            "fault": "20 processes install",
            "driver": "all (5 each)",
            "sent": 20,
            "completed": outcomes.get(str(LATEST), 0),
            "lost": 0,
            "duplicated": 0,
            "stuck": 20 - outcomes.get(str(LATEST), 0),
            "errors": ", ".join(k for k in outcomes if k != str(LATEST)) or "-",
            "slowest": time.monotonic() - started,
            "seconds": time.monotonic() - started,
        }
    )
    assert outcomes == Counter({str(LATEST): 20}), outcomes
    with psycopg.connect(fault_cluster.dsn) as conn:
        rows = conn.execute(f'SELECT version FROM "{schema}".version').fetchall()
    assert rows == [(LATEST,)]
