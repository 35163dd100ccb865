"""The job state machine: states, the named state sets and the transition table."""

from __future__ import annotations

import enum


class JobState(enum.StrEnum):
    """The state a job is in. Compared by name, never by declaration order."""

    CREATED = "created"
    RETRY = "retry"
    ACTIVE = "active"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


QUEUED: frozenset[JobState] = frozenset({JobState.CREATED, JobState.RETRY})
"""Waiting to be fetched (once ``start_after`` has passed)."""

ACTIVE: frozenset[JobState] = frozenset({JobState.ACTIVE})
"""Claimed by a worker."""

FINISHED: frozenset[JobState] = frozenset({JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED})
"""Terminal until an explicit resume or retry."""

UNFINISHED: frozenset[JobState] = QUEUED | ACTIVE
"""Queued or active: the states ``fail`` and ``cancel`` accept."""


class Operation(enum.StrEnum):
    """Operations that move a job between states."""

    FETCH = "fetch"
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"
    RESUME = "resume"
    RETRY = "retry"
    TOUCH = "touch"
    EXPIRE = "expire"
    SNOOZE = "snooze"


TRANSITIONS: dict[Operation, tuple[frozenset[JobState], frozenset[JobState]]] = {
    Operation.FETCH: (QUEUED, frozenset({JobState.ACTIVE})),
    Operation.COMPLETE: (ACTIVE, frozenset({JobState.COMPLETED})),
    Operation.FAIL: (UNFINISHED, frozenset({JobState.RETRY, JobState.FAILED})),
    Operation.CANCEL: (UNFINISHED, frozenset({JobState.CANCELLED})),
    Operation.RESUME: (frozenset({JobState.CANCELLED}), frozenset({JobState.CREATED})),
    Operation.RETRY: (frozenset({JobState.FAILED}), frozenset({JobState.RETRY})),
    Operation.TOUCH: (ACTIVE, ACTIVE),
    Operation.EXPIRE: (ACTIVE, frozenset({JobState.RETRY, JobState.FAILED})),
    Operation.SNOOZE: (ACTIVE, frozenset({JobState.RETRY})),
}
"""operation -> (states it accepts, states it can lead to)."""


def accepts(operation: Operation, state: JobState) -> bool:
    """Whether ``operation`` may act on a job in ``state``."""
    return state in TRANSITIONS[operation][0]


def sql_list(states: frozenset[JobState]) -> tuple[str, ...]:
    """The members of a state set as plain strings, sorted, for an engine's ``IN`` list."""
    return tuple(sorted(s.value for s in states))
