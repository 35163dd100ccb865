"""``store.wait``'s result listener against the run's real PostgreSQL: a listener whose
connection is lost connects again, and the waits it serves are woken by notifications
again (their reads only cover the gap)."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore import waiting


def _listening_pids(dsn: str, channel: str) -> list[int]:
    """The sessions whose last statement was a LISTEN on ``channel``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE query LIKE %s", (f"LISTEN %{channel}%",)
        ).fetchall()
    return [row[0] for row in rows]


def _terminate(dsn: str, pids: list[int]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_lost_result_listener_connects_again_and_wakes_the_wait(
    pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reads again only after a minute: the wait can end in time only by a notification.
    monkeypatch.setattr(waiting, "POLL_FIRST", 60.0)
    monkeypatch.setattr(waiting, "POLL_MAX_NOTIFIED", 60.0)
    monkeypatch.setattr(waiting, "LISTEN_RETRY", 0.05)
    channel = f"alkstore_done_{schema_name}"
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q")
        listener = store._results
        assert listener is not None
        first = store.send("q", 1)
        (job,) = store.fetch("q")
        store.complete("q", job, "warm")
        assert store.wait("q", first, timeout=30).output == "warm"  # starts the listener
        deadline = time.monotonic() + 30
        while not listener.listening:  # it lingers after the wait, connecting meanwhile
            assert time.monotonic() < deadline, "the result listener never listened"
            time.sleep(0.01)

        job_id = store.send("q", 2)
        (job,) = store.fetch("q")
        outcome: dict[str, Any] = {}
        paused = threading.Event()
        reads = waiting.Waiting.outcome

        def noted(self: waiting.Waiting, found: Any) -> Any:
            result = reads(self, found)
            if not isinstance(result, alkstore.Job) and self.listened is not None:
                paused.set()
            return result

        monkeypatch.setattr(waiting.Waiting, "outcome", noted)

        def wait() -> None:
            outcome["job"] = store.wait("q", job_id, timeout=30)

        waiter = threading.Thread(target=wait)
        waiter.start()
        assert paused.wait(30)
        paused.clear()
        pids = _listening_pids(pg_dsn, channel)
        assert len(pids) == 1
        _terminate(pg_dsn, pids)
        # The listener connects again, wakes every wait (it may have lost notifications),
        # and the wait reads its job and pauses again.
        assert paused.wait(30)
        assert _listening_pids(pg_dsn, channel) not in ([], pids)
        store.complete("q", job, "woken")
        waiter.join(30)
        assert outcome["job"].output == "woken"


def test_on_sharded_citus_a_wait_reads_again_and_nothing_notifies(
    pg_dsn: str, schema_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The distributed job table can hold no trigger (row_triggers): the emulation guard
    # would refuse the schema's CREATE TRIGGER, and the store keeps no result listener.
    with alkstore.connect(
        pg_dsn,
        schema=schema_name,
        engine="citus",
        engine_options={"distributed": True},
        emulate=True,
    ) as store:
        assert store._results is None
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            triggers = conn.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                (f'"{schema_name}".job',),
            ).fetchall()
        assert triggers == []
        store.create_queue("q")
        job_id = store.send("q", 1)
        (job,) = store.fetch("q")
        paused = threading.Event()
        reads = waiting.Waiting.outcome

        def noted(self: waiting.Waiting, found: Any) -> Any:
            result = reads(self, found)
            if not isinstance(result, alkstore.Job):
                assert self.listened is None
                paused.set()
            return result

        monkeypatch.setattr(waiting.Waiting, "outcome", noted)
        outcome: dict[str, Any] = {}
        waiter = threading.Thread(
            target=lambda: outcome.update(job=store.wait("q", job_id, timeout=30))
        )
        waiter.start()
        assert paused.wait(30)
        store.complete("q", job, "done")
        waiter.join(30)
        assert outcome["job"].output == "done"
