"""The in-memory engine's test hooks: what the conformance suite sets up and reads."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from ...core.errors import InvalidOptions
from ...core.model import Model
from ...core.plans import Plan, Row
from .database import MemorySchema, SchemaPlans, now, steps_of

TIMESTAMPS = (
    "created_on",
    "start_after",
    "started_on",
    "completed_on",
    "heartbeat_on",
    "keep_until",
)
"""The job timestamps :meth:`MemoryTestHooks.job_rows` gives as ages."""


class MemoryTestHooks:
    """Test-only plans on one schema of a memory database."""

    def __init__(self, engine: SchemaPlans) -> None:
        self.engine = engine

    def advance(self, seconds: float) -> Plan[None]:
        """Let ``seconds`` pass for every job of the schema."""

        def shift(schema: MemorySchema) -> None:
            schema.model.advance(seconds)
            shift = dt.timedelta(seconds=seconds)
            if schema.next_pass is not None:
                schema.next_pass -= shift
            for where, found in schema.schedules.items():
                last = None if found.last_slot is None else found.last_slot - shift
                paused = None if found.paused_on is None else found.paused_on - shift
                schema.schedules[where] = attrs.evolve(
                    found, created_on=found.created_on - shift, last_slot=last, paused_on=paused
                )

        return self.engine._plan("test-advance", shift)

    def job_rows(self) -> Plan[list[Row]]:
        """Every job as a row, each timestamp as its age in seconds."""

        def rows(m: Model) -> list[Row]:
            out: list[Row] = []
            for job in m.jobs.values():
                row: dict[str, Any] = attrs.asdict(job.to_job(), recurse=False)
                row["name"] = row.pop("queue")
                row["state"] = job.state.value
                row["data"] = json.dumps(job.data)
                for column in ("output", "trace_context"):
                    row[column] = None if row[column] is None else json.dumps(row[column])
                # As the postgres engine's column: a JSON array, its times in ISO 8601.
                row["errors"] = json.dumps(
                    [attrs.asdict(e) | {"at": e.at.isoformat()} for e in job.errors]
                )
                for column in TIMESTAMPS:
                    moment = row[column]
                    row[column] = None if moment is None else (m.now - moment).total_seconds()
                out.append(row)
            return out

        return self.engine._model("test-job-rows", rows)

    def job_count(self) -> Plan[int]:
        """How many jobs the schema holds."""
        return self.engine._model("test-job-count", lambda m: len(m.jobs))

    def set_job_columns(
        self, queue: str, job_id: uuid.UUID, values: Mapping[str, int | bool | dt.datetime | None]
    ) -> Plan[int]:
        """Store ``values`` in fields of one job as they are, past validation."""

        def store(m: Model) -> int:
            job = m.get_job(queue, job_id)
            if job is None:
                return 0
            for name, value in values.items():
                if not hasattr(job, name):
                    raise InvalidOptions("values", name, "is no field of a job")
                setattr(job, name, value)
            return 1

        return self.engine._model("test-set-job-columns", store)

    def reset(self) -> Plan[None]:
        """Delete every job and queue."""

        def reset(schema: MemorySchema) -> None:
            fresh = Model(now(), jitter=schema.model.jitter)
            vars(schema.model).update(vars(fresh))
            schema.queue_times.clear()
            schema.schedules.clear()
            schema.subscriptions.clear()
            schema.processes.clear()

        return self.engine._plan("test-reset", reset)

    def drop(self) -> Plan[None]:
        """Remove the schema."""

        def drop() -> None:
            with self.engine.database.lock:
                self.engine.database.schemas.pop(self.engine.schema, None)

        return Plan("test-drop", lambda: steps_of(drop))

    def version_records(self) -> Plan[int]:
        """One record per installed schema."""
        return self.engine._plan("test-version-records", lambda _s: 1)

    def set_version(self, version: int) -> Plan[None]:
        """Record ``version`` as installed."""

        def set_version() -> None:
            with self.engine.database.lock:
                self.engine.database.install(self.engine.schema).version = version

        return Plan("test-set-version", lambda: steps_of(set_version))

    def job_storage(self) -> Plan[dict[str, int]]:
        """One store of jobs: ``{"jobs": count}``."""
        return self.engine._model("test-job-storage", lambda m: {"jobs": len(m.jobs)})
