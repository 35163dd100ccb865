"""What a peer is asked to do: the same drain alkstore does."""

from __future__ import annotations

import attrs

from ..drain import DEFAULT_TIMEOUT, shared_connections, warmup_jobs
from ..results import Cell
from ..server import STEADY, VARIANTS


@attrs.frozen
class DrainSpec:
    """Pre-enqueue ``jobs`` jobs, then drain them: ``consumers`` consumers, ``batch`` a fetch."""

    jobs: int
    consumers: int
    batch: int
    timeout: float = DEFAULT_TIMEOUT
    variant: str = attrs.field(default=STEADY, validator=attrs.validators.in_(VARIANTS))
    """How the tables are prepared after the prefill (:func:`..server.prepare_drain`)."""
    connections: int | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.ge(1)),
    )
    """Server connections the consumers share (``--connections``; None: one a consumer)."""

    @property
    def pool_size(self) -> int:
        """The connections the consumers share (:func:`..drain.shared_connections`)."""
        return shared_connections(self.consumers, self.connections)

    @property
    def warmup(self) -> int:
        """Jobs of the untimed warm-up drain (the same count alkstore warms up with)."""
        return warmup_jobs(self.consumers, self.batch)

    def cell(self, system: str, driver: str | None = None) -> Cell:
        """The table cell of ``system``'s drain (through ``driver``) of this spec."""
        if self.connections is not None:
            system = f"{system} [{self.connections} connections]"
        return Cell(
            system=system,
            driver=driver,
            consumers=self.consumers,
            batch=self.batch,
            variant=self.variant,
        )


__all__ = ["DrainSpec"]
