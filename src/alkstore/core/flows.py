"""Flows: jobs that wait for other jobs (see ``docs/queues.md``, "Flows").

A flow is a list of steps ``{"ref", "queue", "data", "depends_on", **send options}``. It is
validated here, before anything is written: every ref unique, every dependency a ref of the
same flow, and no cycle (:class:`~.errors.InvalidOptions` names the refs of one).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from .errors import InvalidOptions
from .options import JobOptions, NewJob
from .validation import check_queue_name

STEP_KEYS = frozenset({"ref", "queue", "data", "depends_on"})
"""The keys of a step that are not send options."""


@attrs.frozen
class FlowStep:
    """One validated step: its ref, its queue, the job to send and the refs it waits for."""

    ref: str
    queue: str
    job: NewJob
    depends_on: tuple[str, ...]

    @property
    def start_at(self) -> dt.datetime | None:
        """A blocked job's absolute start, if its ``start_after`` was a datetime."""
        start = self.job.options.start_after
        return start if isinstance(start, dt.datetime) else None

    @property
    def delay(self) -> float | None:
        """A blocked job's delay in seconds after its last parent completed, if any."""
        start = self.job.options.start_after
        return start if isinstance(start, float) else None


def _step(index: int, spec: object, new_id: Callable[[], uuid.UUID]) -> FlowStep:
    where = f"steps[{index}]"
    if not isinstance(spec, Mapping):
        raise InvalidOptions(where, spec, "must be a mapping: {'ref', 'queue', 'data', ...}")
    ref = spec.get("ref")
    if not isinstance(ref, str) or not ref:
        raise InvalidOptions(f"{where}.ref", ref, "must be a non-empty string")
    queue = check_queue_name(spec.get("queue"), f"{where}.queue")
    depends = spec.get("depends_on", ())
    if isinstance(depends, str) or not isinstance(depends, Sequence):
        raise InvalidOptions(f"{where}.depends_on", depends, "must be a list of refs")
    if not all(isinstance(d, str) for d in depends):
        raise InvalidOptions(f"{where}.depends_on", depends, "must be a list of refs")
    options = JobOptions.from_kwargs({k: v for k, v in spec.items() if k not in STEP_KEYS})
    job = NewJob.build(spec.get("data"), options, new_id)
    return FlowStep(ref, queue, job, tuple(dict.fromkeys(depends)))


def _check_acyclic(steps: Sequence[FlowStep]) -> None:
    """Refuse a cycle, naming its refs in order (``a -> b -> a``)."""
    parents = {s.ref: s.depends_on for s in steps}
    done: set[str] = set()
    for start in parents:
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, int]] = [(start, 0)]
        while stack:
            ref, i = stack.pop()
            if i == 0:
                if ref in done:
                    continue
                if ref in on_path:
                    cycle = [*path[path.index(ref) :], ref]
                    raise InvalidOptions(
                        "depends_on", cycle, f"forms a cycle: {' -> '.join(cycle)}"
                    )
                path.append(ref)
                on_path.add(ref)
            if i < len(parents[ref]):
                stack.append((ref, i + 1))
                stack.append((parents[ref][i], 0))
            else:
                done.add(ref)
                on_path.discard(path.pop())


def build_flow(specs: object, new_id: Callable[[], uuid.UUID]) -> list[FlowStep]:
    """Validate a flow's steps; every error names the step and field before any I/O."""
    if isinstance(specs, str | bytes | Mapping) or not isinstance(specs, Sequence) or not specs:
        raise InvalidOptions("steps", specs, "must be a non-empty list of step mappings")
    steps = [_step(i, spec, new_id) for i, spec in enumerate(specs)]
    seen: set[str] = set()
    for index, step in enumerate(steps):
        if step.ref in seen:
            raise InvalidOptions(f"steps[{index}].ref", step.ref, "appears twice in the flow")
        seen.add(step.ref)
    ids = [(s.queue, s.job.id) for s in steps]
    if len(set(ids)) != len(ids):
        raise InvalidOptions("id", next(i for i in ids if ids.count(i) > 1), "appears twice")
    for index, step in enumerate(steps):
        for ref in step.depends_on:
            if ref == step.ref:
                raise InvalidOptions(
                    f"steps[{index}].depends_on", ref, "a step cannot wait for itself"
                )
            if ref not in seen:
                raise InvalidOptions(f"steps[{index}].depends_on", ref, "is no ref of this flow")
    _check_acyclic(steps)
    return steps


def edges(steps: Sequence[FlowStep]) -> list[tuple[FlowStep, FlowStep]]:
    """(child, parent) of every dependency of the flow."""
    by_ref = {s.ref: s for s in steps}
    return [(s, by_ref[ref]) for s in steps for ref in s.depends_on]


def to_arrays(rows: Sequence[tuple[Any, ...]], width: int) -> tuple[list[Any], ...]:
    """Rows as one list per column, for binding as arrays."""
    return tuple([row[i] for row in rows] for i in range(width))
