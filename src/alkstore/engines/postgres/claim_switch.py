"""Two ways of running a queue's claims, the second engaged only while it pays: the rule by
which the claim's mark (:mod:`.claim_marks`) and the adaptive claim gate (:mod:`.claim_gate`)
switch.

A switch keeps the times of the last :data:`SAMPLES` claims each way (the default way "off",
the engaged way "on"); it engages when the median off takes more than :data:`ENGAGE_RATIO`
times the median on plus :data:`ENGAGE_FLOOR`, and disengages, at a time of the default way,
when that median no longer takes more than :data:`DISENGAGE_RATIO` times it plus
:data:`DISENGAGE_FLOOR` (the ratios: the mark's; the gate has its own). How
often the way that is not engaged is tried (a probe) is the user's business.
"""

from __future__ import annotations

import statistics
from collections import deque

import attrs

ENGAGE_RATIO = 2.0
ENGAGE_FLOOR = 0.002
"""A switch engages when the default way takes longer than ``ENGAGE_RATIO`` times the
engaged way plus ``ENGAGE_FLOOR`` seconds (the medians of the last :data:`SAMPLES` claims'
times: the server's time for the statement for the mark, the round trip for the gate)."""

DISENGAGE_RATIO = 1.5
DISENGAGE_FLOOR = 0.001
"""An engaged switch disengages when the default way takes no longer than
``DISENGAGE_RATIO`` times the engaged way plus ``DISENGAGE_FLOOR`` seconds (lower than the
engaging bound, so that a switch does not flap on the edge)."""

SAMPLES = 5
"""How many of the last claims each way are compared: their median times (a claim that the
server's scheduler or a lock held up does not move a median; measured without a held
horizon: 8 fetchers at 10 a fetch, a claim's time 0.19 ms from the head and 0.16 from the
mark at the median, and 3 ms averaged over the last few claims now and then)."""


@attrs.define
class Switch:
    """Which way one queue's claims run, from the times of the last claims each way."""

    engage_ratio: float = ENGAGE_RATIO
    disengage_ratio: float = DISENGAGE_RATIO
    """The ratios the rule uses (the floors are the module's)."""
    engaged: bool = False
    off: deque[float] = attrs.Factory(lambda: deque(maxlen=SAMPLES))
    """The server's time of the last claims the default way, in seconds."""
    on: deque[float] = attrs.Factory(lambda: deque(maxlen=SAMPLES))
    """The server's time of the last claims the engaged way, in seconds."""

    def record(self, on: bool, took: float) -> bool:
        """A claim the engaged way (``on``), else the default way, took ``took`` seconds;
        returns whether the switch engaged or disengaged on it."""
        (self.on if on else self.off).append(took)
        if not (self.off and self.on):
            return False
        off, engaged = statistics.median(self.off), statistics.median(self.on)
        if not self.engaged and off > self.engage_ratio * engaged + ENGAGE_FLOOR:
            self.engaged = True
            return True
        if self.engaged and not on and off <= self.disengage_ratio * engaged + DISENGAGE_FLOOR:
            self.engaged = False
            return True
        return False


__all__ = [
    "DISENGAGE_FLOOR",
    "DISENGAGE_RATIO",
    "ENGAGE_FLOOR",
    "ENGAGE_RATIO",
    "SAMPLES",
    "Switch",
]
