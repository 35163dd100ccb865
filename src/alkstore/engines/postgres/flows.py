"""Flows: jobs sent together, each child waiting until all its parents completed.

A waiting child is a ``created`` job with ``start_after = 'infinity'`` (so no claim, index
scan or retention pass reaches it); ``job_blocked`` keeps how many parents it still waits for
and the start it will get, ``job_dependency`` its edges. The completion that completes its
last parent releases it in the same statement or transaction (:mod:`.settle`): no background
resolver. A parent that fails or is cancelled leaves it waiting, visible.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any, cast

from ...core.errors import FlowRefused
from ...core.flows import FlowStep, edges, to_arrays
from ...core.plans import Plan, Statement, Steps
from ...core.records import Job
from .base import EngineBase
from .send import SendMixin
from .sql import read_job_columns


class FlowsMixin(EngineBase):
    """Plans of ``flow``, ``get_dependencies`` and ``get_dependents``."""

    def flow(self, steps: list[FlowStep]) -> Plan[dict[str, uuid.UUID]]:
        """Send every step's job and record the dependencies, in one transaction; the jobs
        with parents wait. ``steps`` are validated and free of cycles (core.flows)."""
        s = self.s
        by_queue = {
            queue: [step.job for step in group]
            for queue, group in itertools.groupby(
                sorted(steps, key=lambda st: st.queue), key=lambda st: st.queue
            )
        }
        sends = [cast(SendMixin, self).send(queue, jobs) for queue, jobs in by_queue.items()]
        children = [step for step in steps if step.depends_on]
        links = [(c.queue, c.job.id, p.queue, p.job.id) for c, p in edges(steps)]
        waits = [(c.queue, c.job.id, len(c.depends_on), c.start_at, c.delay) for c in children]
        blocked_by_queue = {
            queue: [c.job.id for c in group]
            for queue, group in itertools.groupby(
                sorted(children, key=lambda c: c.queue), key=lambda c: c.queue
            )
        }

        refs = {step.job.id: step.ref for step in steps}
        by_ref = {step.ref: step for step in steps}
        parent_ids: dict[str, list[uuid.UUID]] = {}
        for ref in sorted({p for step in steps for p in step.depends_on}):
            parent_ids.setdefault(by_ref[ref].queue, []).append(by_ref[ref].job.id)

        def run() -> Steps[dict[str, uuid.UUID]]:
            # A completion looks for flow parents only in a queue marked as having them
            # (schema.FLOW_PARENTS_VERSION). Marked first, before the writes to the job table:
            # the queue table is a reference table on sharded Citus, and the flow tests pass
            # on a real cluster in this order.
            if parent_ids:
                yield Statement(
                    f"""UPDATE {s}.queue SET flow_parents = true
                    WHERE name = ANY($1::text[]) AND NOT flow_parents""",
                    (sorted(parent_ids),),
                )
            for queue_jobs, send in zip(by_queue.values(), sends, strict=True):
                got = yield from send.steps()
                refused = [refs[j.id] for j, i in zip(queue_jobs, got, strict=True) if i is None]
                if refused:
                    # Raising ends the transaction: the jobs already inserted are rolled back.
                    raise FlowRefused(refused)
            # A completion releases children only of jobs marked as flow parents, so that the
            # completion of any other job never reads the dependency tables.
            for queue, ids in parent_ids.items():
                yield Statement(
                    f"""UPDATE {s}.job SET flow_parent = true
                    WHERE name = $1 AND id = ANY($2::uuid[])""",
                    (queue, ids),
                )
            for queue, ids in blocked_by_queue.items():
                yield Statement(
                    f"""UPDATE {s}.job SET start_after = 'infinity', keep_until = 'infinity'
                    WHERE name = $1 AND id = ANY($2::uuid[])""",
                    (queue, ids),
                )
            # Rows left by deleted jobs whose ids the flow reuses would count for the new ones:
            # the flow's jobs were just inserted, so any row naming them is such a leftover.
            sent = to_arrays([(st.queue, st.job.id) for st in steps], 2)
            for name_column, id_column in (("name", "id"), ("parent_name", "parent_id")):
                yield Statement(
                    f"""DELETE FROM {s}.job_dependency d
                    USING unnest($1::text[], $2::uuid[]) AS n(name, id)
                    WHERE d.{name_column} = n.name AND d.{id_column} = n.id""",
                    sent,
                )
            yield Statement(
                f"""DELETE FROM {s}.job_blocked b
                USING unnest($1::text[], $2::uuid[]) AS n(name, id)
                WHERE b.name = n.name AND b.id = n.id""",
                sent,
            )
            if links:
                yield Statement(
                    f"""INSERT INTO {s}.job_dependency (name, id, parent_name, parent_id)
                    SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::uuid[])""",
                    to_arrays(links, 4),
                )
                yield Statement(
                    f"""INSERT INTO {s}.job_blocked (name, id, waiting, start_at, delay)
                    SELECT * FROM unnest($1::text[], $2::uuid[], $3::int[],
                        $4::timestamptz[], $5::float8[])""",
                    to_arrays(waits, 5),
                )
            return {step.ref: step.job.id for step in steps}

        return self._plan("flow", run, transaction=True, map_error=sends[0].map_error)

    def get_dependencies(self, queue: str, job_id: uuid.UUID) -> Plan[list[Job]]:
        """The jobs job ``job_id`` of ``queue`` waits for (or waited for), oldest first."""
        return self._related("get_dependencies", "name", "parent_name", queue, job_id)

    def get_dependents(self, queue: str, job_id: uuid.UUID) -> Plan[list[Job]]:
        """The jobs that wait (or waited) for job ``job_id`` of ``queue``, oldest first."""
        return self._related("get_dependents", "parent_name", "name", queue, job_id)

    def _related(
        self, name: str, given: str, other: str, queue: str, job_id: uuid.UUID
    ) -> Plan[list[Job]]:
        given_id, other_id = (c.replace("name", "id") for c in (given, other))
        sql = f"""SELECT {read_job_columns("j")} FROM {self.s}.job_dependency d
            JOIN {self.s}.job j ON j.name = d.{other} AND j.id = d.{other_id}
            WHERE d.{given} = $1 AND d.{given_id} = $2::uuid
            ORDER BY j.created_on, j.id"""

        def steps() -> Steps[list[Job]]:
            rows: list[Any] = yield Statement(sql, (queue, job_id))
            if not rows:
                yield from self._require_queue(queue)
            return [Job.from_row(r) for r in rows]

        return self._plan(name, steps)
