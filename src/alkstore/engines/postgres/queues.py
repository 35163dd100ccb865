"""Queue operations: create, change, delete, read and count."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ...core.errors import (
    QueueExists,
    QueueInUse,
    QueueNotFound,
)
from ...core.options import QueueOptions
from ...core.plans import ErrorMap, Plan, Statement, Steps
from ...core.records import Queue, QueueStats, as_int
from ...core.states import QUEUED, JobState
from .identifiers import partition_table, quote_ident
from .policies import QueueHintsMixin, QueueRules
from .sql import (
    QUEUE_COLUMNS,
)


class QueueMixin(QueueHintsMixin):
    """Plans of the queue operations."""

    def set_paused(self, name: str, paused: bool) -> Plan[None]:
        """``pause_queue`` / ``resume_queue``: fetch hands out nothing while paused; sends are
        still accepted. :class:`QueueNotFound` for a missing queue."""

        def steps() -> Steps[None]:
            rows = yield Statement(
                f"UPDATE {self.s}.queue SET paused = $2, updated_on = now() "
                "WHERE name = $1 RETURNING name",
                (name, paused),
            )
            if not rows:
                raise QueueNotFound(name)

        return self._plan("pause_queue" if paused else "resume_queue", steps)

    def _queue_errors(self, name: str, options: QueueOptions) -> ErrorMap:
        # Errors are told apart by SQLSTATE alone, never by constraint name: sharded Citus
        # reports a worker's violation without one (its message names the shard's index,
        # "queue_pkey_102536"). The queue table has one unique key and one foreign key.
        def map_error(sqlstate: str | None, _constraint: str | None) -> Exception | None:
            if sqlstate == "23505":
                return QueueExists(name)
            if sqlstate == "23503":
                return QueueNotFound(options.dead_letter or "", field="dead_letter")
            return None

        return map_error

    def create_queue(self, name: str, options: QueueOptions) -> Plan[None]:
        """Create a queue; with ``partition=True`` it gets its own partition."""
        options.check_dead_letter(name)
        if options.partition:
            self._require("table_partitioning", "partition=True")
            self._require("plpgsql", "partition=True")
        s = self.s
        table = partition_table(name) if options.partition else None

        def steps() -> Steps[None]:
            yield Statement(
                f"""INSERT INTO {s}.queue (name, policy, retry_limit, retry_delay, retry_backoff,
                    retry_delay_max, expire_seconds, heartbeat_seconds, retention_seconds,
                    deletion_seconds, dead_letter, partition, table_name, concurrency_limit,
                    flow_parents)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, false)""",
                (
                    name,
                    options.policy.value,
                    options.retry_limit,
                    options.retry_delay,
                    options.retry_backoff,
                    options.retry_delay_max,
                    options.expire_seconds,
                    options.heartbeat_seconds,
                    options.retention_seconds,
                    options.deletion_seconds,
                    options.dead_letter,
                    options.partition,
                    table,
                    options.concurrency_limit,
                ),
            )
            if table is not None:
                yield Statement(
                    f"SELECT {s}.create_queue_partition($1::text, $2::text, $3::text)",
                    (self.schema, name, table),
                )
            self.learn(
                name,
                QueueRules(
                    options.policy, False, options.concurrency_limit, bool(options.partition)
                ),
            )

        return self._plan(
            "create_queue",
            steps,
            transaction=options.partition,
            map_error=self._queue_errors(name, options),
        )

    def update_queue(self, name: str, changes: dict[str, Any]) -> Plan[Queue]:
        """Change a queue's settings (not ``policy`` or ``partition``); returns the new queue."""
        s = self.s

        def steps() -> Steps[Queue]:
            rows = yield Statement(
                f"SELECT {QUEUE_COLUMNS} FROM {s}.queue WHERE name = $1 FOR UPDATE", (name,)
            )
            if not rows:
                raise QueueNotFound(name)
            new = Queue.from_row(rows[0]).options.updated(changes)
            new.check_dead_letter(name)
            rows = yield Statement(
                f"""UPDATE {s}.queue SET retry_limit = $2, retry_delay = $3, retry_backoff = $4,
                    retry_delay_max = $5, expire_seconds = $6, heartbeat_seconds = $7,
                    retention_seconds = $8, deletion_seconds = $9, dead_letter = $10,
                    concurrency_limit = $11, updated_on = now()
                WHERE name = $1 RETURNING {QUEUE_COLUMNS}""",
                (
                    name,
                    new.retry_limit,
                    new.retry_delay,
                    new.retry_backoff,
                    new.retry_delay_max,
                    new.expire_seconds,
                    new.heartbeat_seconds,
                    new.retention_seconds,
                    new.deletion_seconds,
                    new.dead_letter,
                    new.concurrency_limit,
                ),
            )
            # Fetches of this engine take the keyed claim from now on if a limit was set.
            self.forget(name)
            return Queue.from_row(rows[0])

        dead_letter = changes.get("dead_letter")
        errors = self._queue_errors(name, QueueOptions(dead_letter=dead_letter))
        return self._plan("update_queue", steps, transaction=True, map_error=errors)

    def delete_queue(self, name: str) -> Plan[None]:
        """Delete a queue and all its jobs (refused while another queue dead-letters into it).

        The queue row is locked first, so a concurrent ``send`` either commits before the jobs
        are deleted or finds no queue.
        """
        s = self.s

        def steps() -> Steps[None]:
            rows = yield Statement(
                f"SELECT table_name FROM {s}.queue WHERE name = $1 FOR UPDATE", (name,)
            )
            if not rows:
                raise QueueNotFound(name)
            table = rows[0]["table_name"]
            users = yield Statement(
                f"SELECT name FROM {s}.queue WHERE dead_letter = $1 ORDER BY name", (name,)
            )
            if users:
                raise QueueInUse(
                    f"queue {name!r} is the dead-letter queue of "
                    f"{', '.join(repr(r['name']) for r in users)}"
                )
            if table is not None:
                yield Statement(f"DROP TABLE {s}.{quote_ident(table)}")
            else:
                yield Statement(f"DELETE FROM {s}.job WHERE name = $1", (name,))
            yield Statement(f"DELETE FROM {s}.queue WHERE name = $1", (name,))
            self.forget(name)

        return self._plan("delete_queue", steps, transaction=True)

    def get_queue(self, name: str) -> Plan[Queue | None]:
        """The queue called ``name``, or None."""
        return self._single(
            "get_queue",
            f"SELECT {QUEUE_COLUMNS} FROM {self.s}.queue WHERE name = $1",
            (name,),
            lambda rows: Queue.from_row(rows[0]) if rows else None,
        )

    def queues(self) -> Plan[list[Queue]]:
        """Every queue, by name."""
        return self._single(
            "queues",
            f"SELECT {QUEUE_COLUMNS} FROM {self.s}.queue ORDER BY name",
            (),
            lambda rows: [Queue.from_row(r) for r in rows],
        )

    def queue_stats(self, name: str) -> Plan[QueueStats]:
        """Counts per state, and how long the oldest fetchable queued job has waited."""
        s = self.s

        def steps() -> Steps[QueueStats]:
            yield from self._require_queue(name)
            rows = yield Statement(
                f"""SELECT state, count(*) AS n,
                       extract(epoch FROM now() - min(start_after) FILTER (
                           WHERE start_after <= now() AND isfinite(start_after)))::float8 AS waited
                FROM {s}.job WHERE name = $1 GROUP BY state""",
                (name,),
            )
            counts = dict.fromkeys(JobState, 0)
            waited: list[float] = []
            for row in rows:
                state = JobState(row["state"])
                counts[state] = as_int(row["n"])
                if state in QUEUED and row["waited"] is not None:
                    waited.append(float(row["waited"]))
            oldest = dt.timedelta(seconds=max(waited)) if waited else None
            return QueueStats(name, counts, oldest)

        return self._plan("queue_stats", steps)
