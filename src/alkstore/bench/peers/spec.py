"""What a peer is asked to do: the same drain alkstore does."""

from __future__ import annotations

import attrs

from ..drain import DEFAULT_TIMEOUT, warmup_jobs


@attrs.frozen
class DrainSpec:
    """Pre-enqueue ``jobs`` jobs, then drain them: ``consumers`` consumers, ``batch`` a fetch."""

    jobs: int
    consumers: int
    batch: int
    timeout: float = DEFAULT_TIMEOUT

    @property
    def warmup(self) -> int:
        """Jobs of the untimed warm-up drain (the same count alkstore warms up with)."""
        return warmup_jobs(self.consumers, self.batch)


__all__ = ["DrainSpec"]
