"""Two transactions completing the two parents of one flow job at once: exactly one releases
it. Each transaction alone sees the other parent unfinished; the countdown row they both
change makes the later one wait for the earlier one and see its count."""

from __future__ import annotations

import datetime as dt
import threading
import time

import psycopg

import alkstore


def _lock_waiters(dsn: str, application: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = %s AND wait_event_type = 'Lock'",
            (application,),
        ).fetchone()
        assert row is not None
        return int(row[0])


def test_two_parents_completed_concurrently_release_the_child_once(pg_dsn, schema_name):
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q")
        ids = store.flow(
            [
                {"ref": "a", "queue": "q", "data": 1},
                {"ref": "b", "queue": "q", "data": 2},
                {"ref": "c", "queue": "q", "data": 3, "depends_on": ["a", "b"]},
            ]
        )
        assert len(store.fetch("q", batch_size=5)) == 2
        application = f"flow-race-{schema_name}"
        with (
            psycopg.connect(pg_dsn) as first,
            psycopg.connect(pg_dsn, application_name=application) as second,
        ):
            one = alkstore.connect(first, schema=schema_name, migrate=False)
            two = alkstore.connect(second, schema=schema_name, migrate=False)
            assert one.complete("q", ids["a"]) == 1  # in first's open transaction
            results: list[int] = []

            def complete_b() -> None:
                results.append(two.complete("q", ids["b"]))
                second.commit()

            racer = threading.Thread(target=complete_b)
            racer.start()
            deadline = time.monotonic() + 30
            while _lock_waiters(pg_dsn, application) == 0:
                assert racer.is_alive() and time.monotonic() < deadline, "never blocked"
                time.sleep(0.02)
            first.commit()
            racer.join(30)
            assert not racer.is_alive() and results == [1]
        child = store.get_job("q", ids["c"])
        assert child.start_after < child.keep_until < dt.datetime.max.replace(tzinfo=dt.UTC)
        assert [j.id for j in store.fetch("q")] == [ids["c"]]


def test_maintenance_releases_a_flow_job_a_crash_left_parked(pg_dsn, schema_name):
    # The state a crash between a completion's two statements leaves on engines that change
    # a table once per statement: the countdown reached zero, the job still waits.
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q")
        ids = store.flow(
            [
                {"ref": "a", "queue": "q", "data": 1},
                {"ref": "b", "queue": "q", "data": 2, "depends_on": ["a"]},
            ]
        )
        [parent] = store.fetch("q", batch_size=5)
        assert store.complete("q", parent) == 1
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                f"UPDATE \"{schema_name}\".job SET start_after = 'infinity', "
                "keep_until = 'infinity' WHERE id = %s",
                (ids["b"],),
            )
        assert store.fetch("q") == []
        assert store.maintain().flows_released == 1
        assert [job.id for job in store.fetch("q")] == [ids["b"]]
        assert store.maintain().flows_released == 0
