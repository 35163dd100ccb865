"""The SQL of pub/sub: subscriptions of queues to events, and ``publish``, which sends one
job to every subscribed queue in one ``INSERT … SELECT`` (all of them, or none)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from ...core.errors import QueueNotFound
from ...core.options import JobOptions
from ...core.plans import Plan
from ...core.records import as_uuid
from .new_ids import NEW_ID
from .runtime import notifying
from .send import SEND_OPTION_SQL, trace_context_texts

if TYPE_CHECKING:
    from .base import EngineBase


def subscribe(engine: EngineBase, event: str, queue: str) -> Plan[None]:
    """Subscribe ``queue`` to ``event`` (again: nothing changes)."""
    sql = f"""INSERT INTO {engine.s}.subscription (event, queue) VALUES ($1, $2)
        ON CONFLICT (event, queue) DO NOTHING"""

    def map_error(sqlstate: str | None, constraint: str | None) -> Exception | None:
        return QueueNotFound(queue) if sqlstate == "23503" else None

    return engine._single("subscribe", sql, (event, queue), lambda _rows: None, map_error=map_error)


def unsubscribe(engine: EngineBase, event: str, queue: str) -> Plan[bool]:
    """Remove the subscription; True if there was one."""
    sql = f"DELETE FROM {engine.s}.subscription WHERE event = $1 AND queue = $2 RETURNING queue"
    return engine._single("unsubscribe", sql, (event, queue), bool)


def subscriptions(engine: EngineBase, event: str) -> Plan[list[str]]:
    """The queues subscribed to ``event``, by name."""
    sql = f"SELECT queue FROM {engine.s}.subscription WHERE event = $1 ORDER BY queue"
    return engine._single("subscriptions", sql, (event,), lambda rows: [r["queue"] for r in rows])


def publish(
    engine: EngineBase, event: str, data_json: str | None, options: JobOptions
) -> Plan[list[tuple[str, uuid.UUID]]]:
    """One job for every queue subscribed to ``event``, in one statement; returns
    ``(queue, id)`` of each. The options resolve job > queue > default as ``send`` does."""
    params: list[Any] = [event, data_json]
    values = []
    for name, (sql_type, default) in SEND_OPTION_SQL.items():
        params.append(getattr(options, name))
        values.append(f"coalesce(${len(params)}::{sql_type}, {default})")
    start = options.start_after
    params.append(start if isinstance(start, dt.datetime) else None)
    params.append(start if isinstance(start, float) else None)
    at = (
        f"coalesce(${len(params) - 1}::timestamptz, "
        f"now() + coalesce(${len(params)}::float8, 0) * interval '1 second')"
    )
    params.append(trace_context_texts([options])[0])
    trace = f"${len(params)}::text::jsonb"
    s = engine.s
    sql = f"""INSERT INTO {s}.job (id, name, data, {", ".join(SEND_OPTION_SQL)},
            policy, trace_context, start_after, keep_until)
        SELECT {NEW_ID}, q.name, $2::text::jsonb, {", ".join(values)}, q.policy, {trace},
            sa.at,
            sa.at + {values[list(SEND_OPTION_SQL).index("retention_seconds")]}
                * interval '1 second'
        FROM {s}.subscription sub JOIN {s}.queue q ON q.name = sub.queue
        CROSS JOIN LATERAL (SELECT {at} AS at) sa
        WHERE sub.event = $1
        RETURNING name, id"""
    sql, bound = notifying(engine, sql, tuple(params), "changed.name")
    return engine._single(
        "publish",
        sql,
        bound,
        lambda rows: sorted((r["name"], as_uuid(r["id"])) for r in rows),
    )
