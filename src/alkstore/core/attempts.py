"""Attempt history and snoozes: what the core decides about a failed or snoozed attempt.

Every failed attempt of a job appends one entry to its ``errors`` (docs/workers.md, "Attempt
history"): ``{attempt, at, name, message, stack}``, oldest first, at most
:data:`MAX_ERRORS` entries (the oldest are dropped), each ``message`` and ``stack`` cut to
:data:`MAX_MESSAGE` and :data:`MAX_STACK` characters. An engine appends in the statement
that fails the job: the ``name``, ``message`` and ``stack`` come from
:func:`attempt_error_json` (bound once for every target), ``attempt`` and ``at`` from the
row and the server's clock.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

from .errors import AlkstoreError, InvalidOptions
from .validation import MAX_DELAY

MAX_ERRORS = 20
"""The most attempts a job's ``errors`` keeps: the latest ones."""

MAX_MESSAGE = 2_000
"""The longest ``message`` an entry keeps (its first characters)."""

MAX_STACK = 8_000
"""The longest ``stack`` an entry keeps: its last characters, where the raising frame is."""


def _cut_head(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[:limit] + "…"


def _cut_tail(value: str, limit: int) -> str:
    return value if len(value) <= limit else "…" + value[-limit:]


def attempt_error(output: Any) -> dict[str, str | None]:
    """The ``name``, ``message`` and ``stack`` of an entry, from the failed job's ``output``
    (as stored: an exception is ``{name, message, stack}``; any other value is the message,
    as JSON text unless it is a string)."""
    if isinstance(output, dict):
        parts = [output.get(key) for key in ("name", "message", "stack")]
        name, message, stack = (part if isinstance(part, str) else None for part in parts)
    else:
        name, stack = None, None
        message = output if output is None or isinstance(output, str) else json.dumps(output)
    return {
        "name": None if name is None else _cut_head(name, MAX_MESSAGE),
        "message": None if message is None else _cut_head(message, MAX_MESSAGE),
        "stack": None if stack is None else _cut_tail(stack, MAX_STACK),
    }


def attempt_error_json(output_json: str | None) -> str:
    """:func:`attempt_error` of an ``output`` given as its JSON text (as engines get it)."""
    output = None if output_json is None else json.loads(output_json)
    return json.dumps(attempt_error(output))


def snooze_seconds(value: object) -> float:
    """A snooze's delay in seconds: a number or ``timedelta`` from 0 to ``MAX_DELAY`` (365
    days, as ``retry_delay``); anything else is :class:`InvalidOptions` naming the value."""
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else value
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or not 0 <= seconds <= MAX_DELAY
    ):
        raise InvalidOptions(
            "seconds", value, f"a snooze is a number of seconds from 0 to {MAX_DELAY} (365 days)"
        )
    return float(seconds)


class Snooze(AlkstoreError):
    """Raised by a handler: put its job back in the queue, due ``seconds`` from now, without
    spending an attempt (docs/workers.md, "Snooze"). ``seconds`` is a number or a
    ``timedelta`` from 0 to 365 days; anything else raises :class:`InvalidOptions` here."""

    def __init__(self, seconds: float | dt.timedelta) -> None:
        self.seconds: float = snooze_seconds(seconds)
        """The delay in seconds."""
        super().__init__(f"snoozed for {self.seconds:g} s")
