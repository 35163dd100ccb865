"""The embedded engine end to end: ``pglite://`` URIs, persistence, one serialised session."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import alkstore
from alkstore.engines.pglite.engine import data_dir_of


def _bridge_pids(data_dir: Path) -> list[int]:
    """Node processes serving ``data_dir`` (read from /proc, no helper library needed)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"bridge" in a for a in args) and str(data_dir).encode() in args:
            pids.append(int(entry.name))
    return pids


def _running(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while _running(pid):
        assert time.monotonic() < deadline, f"bridge {pid} still running"
        time.sleep(0.05)


def test_uri_forms():
    assert data_dir_of("pglite://") is None
    assert data_dir_of("pglite:///var/lib/app") == "/var/lib/app"
    assert data_dir_of("pglite://relative/dir") == "relative/dir"


def test_jobs_survive_closing_the_store(tmp_path):
    uri = f"pglite://{tmp_path}/db"
    with alkstore.connect(uri) as store:
        assert store.engine.name == "pglite"
        store.create_queue("q")
        job_id = store.send("q", {"kept": True})
    with alkstore.connect(uri, driver="pg8000") as store:
        assert store.get_job("q", job_id).data == {"kept": True}


def test_jobs_survive_kill_9_of_the_bridge(tmp_path):
    data = tmp_path / "db"
    store = alkstore.connect(f"pglite://{data}")
    try:
        store.create_queue("q")
        job_id = store.send("q", "after-send")
        (pid,) = _bridge_pids(data)
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid)
    finally:
        store.close()
    with alkstore.connect(f"pglite://{data}") as again:
        assert again.get_job("q", job_id).data == "after-send"


def test_the_bridge_stops_with_the_store(tmp_path):
    data = tmp_path / "db"
    with alkstore.connect(f"pglite://{data}"):
        (pid,) = _bridge_pids(data)
    _wait_gone(pid)


def test_many_threads_share_one_store_without_deadlock():
    with alkstore.connect("pglite://") as store:
        store.create_queue("q")
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(20):
                    store.send("q", {"t": n, "i": i})
                    for job in store.fetch("q"):
                        store.complete("q", job)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads) and errors == []
        for job in store.fetch("q", batch_size=200):
            store.complete("q", job)
        assert store.queue_stats("q").counts["completed"] == 160


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
def test_many_tasks_share_one_async_store(driver):
    async def scenario() -> int:
        async with alkstore.connect_async("pglite://", driver=driver) as store:
            await store.create_queue("q")

            async def work(n: int) -> None:
                for i in range(10):
                    await store.send("q", {"t": n, "i": i})
                    for job in await store.fetch("q"):
                        await store.complete("q", job)

            await asyncio.wait_for(asyncio.gather(*(work(n) for n in range(8))), 120)
            for job in await store.fetch("q", batch_size=100):
                await store.complete("q", job)
            return (await store.queue_stats("q")).counts["completed"]

    assert asyncio.run(scenario()) == 80
