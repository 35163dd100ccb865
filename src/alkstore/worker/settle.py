"""What both worker shells share: how a handler is called and how its result settles jobs.

The thread shell (:mod:`.threads`) and the task shell (:mod:`.tasks`) differ only in how they
wait and run plans; everything decided about a job is decided here, once.
"""

from __future__ import annotations

import inspect
import traceback
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..core.attempts import Snooze
from ..core.errors import InvalidOptions
from ..core.plans import Plan, Steps
from ..core.records import Job
from ..operations import Operations

STOPPED = {
    "name": "WorkerStopped",
    "message": "the worker stopped before the handler returned",
    "stack": "",
}
"""The error of a job whose handler outlived ``stop(timeout)``: it fails, so it retries."""


def error_of(exc: BaseException) -> dict[str, str]:
    """The ``output`` of a job failed by ``exc``: its class name, message and traceback."""
    return {
        "name": type(exc).__name__,
        "message": str(exc),
        "stack": "".join(traceback.format_exception(exc)),
    }


def wants_context(handler: Callable[..., Any]) -> bool:
    """Whether ``handler`` takes a second positional argument (the :class:`JobContext`)."""
    if not callable(handler):
        raise InvalidOptions("handler", handler, "must be callable")
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    if any(p.kind is p.VAR_POSITIONAL for p in positional):
        return True
    return len(positional) >= 2


def native_connection(session: Any) -> Any:
    """The client library's connection under a session (through an emulation guard)."""
    while not hasattr(session, "connection") and hasattr(session, "inner"):
        session = session.inner
    return session.connection


@attrs.frozen
class Settlement:
    """The plans that record a handler's result, and how many completions they must make."""

    plans: list[Plan[int]]
    completions: int
    """Jobs the plans complete (a transactional worker rolls back if fewer were)."""
    failed: list[tuple[Job, dict[str, str]]]
    """Jobs failed by an exception, with the error stored."""
    whole: tuple[Any] | None = None
    """``(output,)`` when the settlement is one completion of every job with one output: a
    worker may then complete and claim its next jobs in one ``complete_and_fetch``."""


def settle(
    ops: Operations,
    queue: str,
    jobs: list[Job],
    *,
    batch: bool,
    result: Any = None,
    error: BaseException | None = None,
) -> Settlement:
    """The settlement of a handler call on ``jobs`` that returned ``result`` or raised
    ``error``. A result that cannot be stored (not JSON, a mapping naming other jobs) fails
    the call's jobs with that error instead."""
    if error is None:
        try:
            return _settle_result(ops, queue, jobs, batch, result)
        except Exception as exc:
            error = exc
    if isinstance(error, Snooze):
        # Counted as completions: a transactional worker rolls back when one was lost.
        return Settlement([snoozed(ops, queue, jobs, error)], len(jobs), [])
    stored = error_of(error)
    return Settlement([ops.fail(queue, jobs, stored)], 0, [(job, stored) for job in jobs])


def snoozed(ops: Operations, queue: str, jobs: list[Job], snooze: Snooze) -> Plan[int]:
    """The plan that snoozes ``jobs`` (docs/workers.md, "Snooze") and, in the same
    transaction, fails those a stately policy kept from snoozing (their key's retry slot
    taken), so that none is left active until it expires; how many were settled."""
    snooze_plan = ops.snooze(queue, jobs, snooze.seconds)
    fail_plan = ops.fail(queue, jobs, error_of(snooze))

    def steps() -> Steps[int]:
        done: int = yield from snooze_plan.steps()
        if done < len(jobs):
            # Fenced to the attempt: only the jobs still active in it fail.
            done += yield from fail_plan.steps()
        return done

    return attrs.evolve(snooze_plan, steps=steps, transaction=True)


def _settle_result(
    ops: Operations, queue: str, jobs: list[Job], batch: bool, result: Any
) -> Settlement:
    if not batch or result is None:
        return Settlement([ops.complete(queue, jobs, result)], len(jobs), [], (result,))
    if not isinstance(result, Mapping):
        raise TypeError(
            f"a batch handler returns None or a mapping {{job.id: output | Exception}}, "
            f"not {type(result).__name__}"
        )
    known = {job.id for job in jobs}
    strange = [key for key in result if key not in known]
    if strange:
        raise ValueError(f"the handler's result names jobs not in this batch: {strange}")
    plain: list[Job] = []
    plans: list[Plan[int]] = []
    failed: list[tuple[Job, dict[str, str]]] = []
    for job in jobs:
        outcome = result.get(job.id)
        if isinstance(outcome, Snooze):
            plans.append(snoozed(ops, queue, [job], outcome))
        elif isinstance(outcome, BaseException):
            stored = error_of(outcome)
            failed.append((job, stored))
            plans.append(ops.fail(queue, job, stored))
        elif outcome is None:
            plain.append(job)
        else:
            plans.append(ops.complete(queue, job, outcome))
    if plain:
        plans.insert(0, ops.complete(queue, plain, None))
    return Settlement(plans, len(jobs) - len(failed), failed)


def job_key(jobs: list[Job]) -> uuid.UUID:
    """The key of one handler call among a worker's running calls: its first job's id."""
    return jobs[0].id


class JobLost(Exception):
    """A transactional handler's job was settled elsewhere (cancelled, expired) meanwhile:
    its writes roll back."""
