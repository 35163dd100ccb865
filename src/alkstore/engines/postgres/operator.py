"""The operator's plans of the engine contract (:class:`~alkstore.core.contracts.OperatorPlans`),
on the SQL of :mod:`.purge` and :mod:`.processes`."""

from __future__ import annotations

from ...core.plans import Plan
from ...core.records import WorkerProcess
from ...core.states import JobState
from . import processes, purge
from .base import EngineBase


class OperatorMixin(EngineBase):
    """``purge_jobs``' batches and the worker processes' records."""

    def purge_batch(self, queue: str, states: frozenset[JobState], batch_size: int) -> Plan[int]:
        """See :func:`.purge.purge_batch`."""
        return purge.purge_batch(self, queue, states, batch_size)

    def record_process(self, owner: str, ttl: float, info_json: str) -> Plan[None]:
        """See :func:`.processes.record_process`."""
        return processes.record_process(self, owner, ttl, info_json)

    def forget_process(self, owner: str) -> Plan[None]:
        """See :func:`.processes.forget_process`."""
        return processes.forget_process(self, owner)

    def list_processes(self) -> Plan[list[WorkerProcess]]:
        """See :func:`.processes.list_processes`."""
        return processes.list_processes(self)
