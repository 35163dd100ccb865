"""Waiting, with a deadline, until another session of the test database waits for a lock."""

from __future__ import annotations

import time
from typing import Any

import psycopg

LOCK_WAITS = """SELECT count(*) FROM pg_stat_activity
    WHERE wait_event_type = 'Lock' AND datname = current_database()
      AND (%(event)s::text IS NULL OR wait_event = %(event)s)"""


def wait_for_a_lock_wait(
    conn: psycopg.Connection[Any], what: str, event: str | None = None, seconds: float = 10.0
) -> None:
    """Return once a session waits for a lock (of the wait event ``event``, e.g.
    ``advisory``, if given); fail, naming ``what`` was expected, after ``seconds``."""
    deadline = time.monotonic() + seconds
    while conn.execute(LOCK_WAITS, {"event": event}).fetchone()[0] == 0:  # type: ignore[index]
        assert time.monotonic() < deadline, f"{what} never waited for a lock"
        time.sleep(0.01)  # polling interval; the condition above is what synchronises
