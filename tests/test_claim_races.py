"""Claims that race with other writers, on a real PostgreSQL (the engine re-finds by ctid)."""

from __future__ import annotations

import threading
from typing import Any

import psycopg

import alkstore
from alkstore.engines.postgres.identifiers import quote_schema
from lock_waits import wait_for_a_lock_wait


def test_a_job_changed_while_the_claim_waits_is_still_claimed(pg_dsn, schema_name):
    # complete_and_fetch takes its snapshot, then waits for the row it completes. Meanwhile
    # another writer changes the queued job (it stays queued): the claim locks the job's new
    # version, which its ctid lookup under the old snapshot cannot see, and must claim again.
    s = quote_schema(schema_name)
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q")
        first = store.send("q", "first")
        (job,) = store.fetch("q")
        waiting = store.send("q", "waiting")
        result: dict[str, Any] = {}
        with psycopg.connect(pg_dsn) as locker, psycopg.connect(pg_dsn, autocommit=True) as other:
            locker.execute(f"SELECT 1 FROM {s}.job WHERE id = %s FOR UPDATE", (first,))
            worker = threading.Thread(
                target=lambda: result.update(handoff=store.complete_and_fetch("q", job))
            )
            worker.start()
            wait_for_a_lock_wait(other, "the claim")
            other.execute(f"UPDATE {s}.job SET priority = priority WHERE id = %s", (waiting,))
            locker.commit()
            worker.join(timeout=30)
        assert result["handoff"].completed == 1
        assert [j.id for j in result["handoff"].jobs] == [waiting]
        assert store.get_job("q", waiting).state is alkstore.JobState.ACTIVE
