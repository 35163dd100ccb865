"""The engine against the reference model (spec §2 to §5, §9): random operation sequences.

A hypothesis state machine sends, fetches, completes, fails, cancels, resumes, retries,
deletes, touches, runs maintenance and lets time pass, through the store under test and
through :class:`~alkstore.core.model.Model` alike. After every step both must agree on every
job (state, retry counts, options, data, output, which timestamps are set and how old they
are, dead-letter copies by source job) and on what every operation returned.

Time is chosen so that the two clocks cannot disagree. The clock moves in steps of
``ADVANCES`` (multiples of 5 s) and every fixed delay is 1 s short of a multiple of 5 (delays
and expiry 9, 14, 34 or 64 s, heartbeats 14 or 24 s, deletion 64 s, retention 104 s, so
``keep_until`` is 104 or 118 s after an event): a deadline is never within 3 s of a time the
test can reach. The engine's ``now()`` runs ahead of the model's clock by the real time a run
has taken; the model is told that bound (``Model.slack``) and refuses any decision it could
change, and such a run is discarded rather than judged (only a run slower than about 3 s
could hit that). Retry backoff (random jitter) is handled the same way: an advance that would
leave a backoff retry's due time or ``keep_until`` undecided is skipped.

Rules act where they can: each run starts with jobs in both queues, the settling rules are
enabled only when the model has a job they accept, and half of their targets are drawn among
such jobs; the other half are anything seen so far: stale attempts (the job was settled or
fetched again since), jobs of the other queue, deleted jobs.

A failure prints the shrunk steps; ``jobs_<n>`` are the job ids (the job's data is ``n``) and
``attempts_<n>`` the fetched or re-read ``Job`` objects used as fences.
``ALKSTORE_MODEL_EXAMPLES`` raises the number of runs (default 25) for a longer search.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
from hypothesis import HealthCheck, event, note, reject, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from alkstore import Job, JobOptions, JobState, QueueOptions
from alkstore.core.errors import JobConflict
from alkstore.core.model import BLOCKED, AmbiguousTiming, Fence, Model, ModelJob, ModelSchedules
from alkstore.core.records import FailedAttempt, as_errors
from alkstore.core.tracecontext import read_trace_context

from .conftest import examples

T = TypeVar("T")

QUEUES: dict[str, dict[str, Any]] = {
    "dlq": {"retention_seconds": 104},
    "q0": {
        "retry_limit": 0,
        "expire_seconds": 34,
        "retention_seconds": 104,
        "deletion_seconds": 64,
        "dead_letter": "dlq",
    },
    "q2": {
        "retry_limit": 2,
        "expire_seconds": 64,
        "heartbeat_seconds": 14,
        "retention_seconds": 104,
        "deletion_seconds": 0,
    },
    # Policies (docs/queues.md): one active job per key and at most two active in all; and
    # per-key creation order, a failed job blocking its key.
    "qs": {"policy": "singleton", "retry_limit": 1, "expire_seconds": 34, "concurrency_limit": 2},
    "qf": {"policy": "key_strict_fifo", "retry_limit": 1, "retry_delay": 14},
}
"""Queues of every run (created in this order). ``dlq`` only receives dead-letter copies."""

WORK_QUEUES = ("q0", "q2", "qs", "qf")
EVENT = "model.event"
"""The event the work queues subscribe to."""
SCHEDULE_KEYS = ("", "k")
SCHEDULE_CRONS = ("* * * * *", "*/5 * * * *", "0 3 1 7 *")
"""Every minute, every five minutes (whose slots a ``missed="skip"`` schedule can miss when
time jumps), and a slot months away (bookkeeping only)."""
CRON_LEAD = dt.timedelta(hours=2, seconds=30)
"""Where the cron clock starts, after the hour the run began: past the creation of every
schedule of the run and 30 s into a minute, so which slot is due depends on the steps
alone, never on the wall clock (hypothesis replays a run and must see the same slots)."""
CRON_STEPS = (0, 20, 65, 330)
"""Seconds the cron clock (``fire_schedules(now=...)``) moves before a firing pass."""
ADVANCES = (5, 30, 60, 200)
SLACK_MARGIN = 0.5
"""Seconds added to the measured run time for the engine's lead over the model's clock."""

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
"""A W3C trace context some jobs carry (passed through, kept by dead-letter copies)."""
JOB_OPTIONS: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "priority": st.sampled_from([1, -1]),
            "retry_limit": st.just(1),
            "retry_delay": st.just(14),
            "start_after": st.just(14),
            "expire_seconds": st.just(9),
            "heartbeat_seconds": st.just(24),
            "retry_backoff": st.just(True),
            "singleton_key": st.sampled_from(["a", "b"]),
            "trace_context": st.just({"traceparent": TRACEPARENT}),
        },
    ),
)
"""Per-job options: mostly none, else a few overrides of the queue's settings."""
BATCH = st.lists(
    st.fixed_dictionaries({"rank": st.integers(0, 3), "options": JOB_OPTIONS}),
    min_size=1,
    max_size=4,
)
"""Jobs of one ``send_many``: options, and ``rank``, the high bits of the id (jobs of one
statement share ``created_on`` and are fetched in id order)."""


def ids_for(*states: JobState) -> st.SearchStrategy[list[Target]]:
    """1 to 3 of the ids and attempts seen so far, half of the draws among those whose job is
    in one of ``states`` (so the operation has something to act on); the rest are any: stale
    fences, jobs of another queue or state, deleted jobs.

    Drawn from the machine's list, not from ``one_of`` of the bundles (which marks a run
    invalid whenever it picks an empty bundle); the values are the bundles' own objects, so
    steps print their names."""

    def build(machine: ModelMachine) -> st.SearchStrategy[list[Target]]:
        choice = st.sampled_from(machine.handles)
        fitting = [h for h in machine.handles if machine.state_of(h) in states]
        if fitting:
            choice = st.sampled_from(fitting) | choice
        return st.lists(choice, min_size=1, max_size=3)

    return st.runner().flatmap(build)


FETCH_QUEUE = st.runner().flatmap(
    lambda machine: st.sampled_from(machine.due_queues()) | st.sampled_from(WORK_QUEUES)
)
"""A work queue, half the time one where the model has a job due (if there is one)."""
OUTPUTS = st.sampled_from([None, "done", {"n": 1}])
ERRORS = st.sampled_from([None, "boom", {"code": 7}, {"name": "E", "message": "m", "stack": "s"}])

TIMESTAMPS = (
    "created_on",
    "start_after",
    "started_on",
    "completed_on",
    "heartbeat_on",
    "keep_until",
)
FIELDS = (
    "state",
    "priority",
    "retry_count",
    "retry_limit",
    "expire_seconds",
    "heartbeat_seconds",
    "retention_seconds",
    "deletion_seconds",
    "data",
    "output",
    "source_queue",
    "source_retry_count",
    "trace_context",
    "errors",
)


@attrs.frozen
class Attempt:
    """A fetched (or re-read) job: the engine's ``Job`` and the model's fence of it."""

    job: Job
    fence: Fence


Target = uuid.UUID | Attempt


def _engine_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of the engine's ``job_rows`` hook with driver differences normalised."""
    out: dict[str, Any] = {
        "id": uuid.UUID(str(row["id"])),
        "queue": row["name"],
        "source_id": None if row["source_id"] is None else uuid.UUID(str(row["source_id"])),
    }
    for name in FIELDS:
        value = row[name]
        if name == "trace_context":
            value = read_trace_context(value)
        elif name == "errors":
            value = _history(as_errors(value))
        elif name in ("data", "output"):
            value = None if value is None else json.loads(value)
        elif value is not None and name not in ("state", "source_queue"):
            value = int(value)
        out[name] = value
    for name in TIMESTAMPS:
        out[name] = None if row[name] is None else float(row[name])
    return out


def _history(errors: Sequence[FailedAttempt]) -> list[tuple[Any, ...]]:
    """An attempt history, without the times (each engine's clock reads its own)."""
    return [(e.attempt, e.name, e.message, e.stack) for e in errors]


def _model_row(job: ModelJob) -> dict[str, Any]:
    row = {name: getattr(job, name) for name in FIELDS} | {"state": job.state.value}
    return row | {"errors": _history(job.errors)}


def _some(*states: JobState) -> Callable[[ModelMachine], bool]:
    """Precondition: the model holds a job (not a dead letter) in one of ``states``, so the
    rule can act (its targets may still miss: stale fences, another queue, another state)."""

    def check(machine: ModelMachine) -> bool:
        return any(j.state in states and j.source_id is None for j in machine.model.all_jobs())

    return check


class ModelMachine(RuleBasedStateMachine):
    """Drives the store under test and the model with the same operations."""

    jobs = Bundle("jobs")
    attempts = Bundle("attempts")

    def __init__(self, alkstore_store: Any) -> None:
        super().__init__()
        self.store = alkstore_store
        alkstore_store.reset()
        self.started = time.monotonic()
        self.model = Model()
        for name, options in QUEUES.items():
            alkstore_store.create_queue(name, **options)
            self.model.create_queue(name, QueueOptions(**options))
        self.queue_of: dict[uuid.UUID, str] = {}
        self.label: dict[uuid.UUID, str] = {}
        self.handles: list[Target] = []
        """Every id sent and every attempt fetched or re-read, in order."""
        self.subscribed: set[str] = set()
        """The work queues subscribed to :data:`EVENT`."""
        self.schedules = ModelSchedules()
        """The model of the schedules and of the slots they fire."""
        hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
        self.cron_now = hour + CRON_LEAD
        """The controllable clock of firing passes (``fire_schedules(now=...)``): only
        ``fire_schedules`` moves it, ``advance`` shifts the stored creation times and last
        slots back instead (as it does every job's timestamps)."""

    # -- helpers ---------------------------------------------------------------------------

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _model(self, operation: Callable[..., T], *args: Any) -> T:
        """Run a model operation first; discard the run if its outcome depends on timing."""
        self.model.slack = self._elapsed() + SLACK_MARGIN
        try:
            return operation(*args)
        except AmbiguousTiming as exc:
            note(f"run discarded, timing undecidable: {exc}")
            reject()

    def _new_id(self, rank: int = 0) -> uuid.UUID:
        """A fresh id; ``rank`` orders it among jobs created by the same statement."""
        number = len(self.label)
        job_id = uuid.UUID(int=(rank << 64) | number)
        self.label[job_id] = f"jobs_{number}"
        return job_id

    def _queue(self, targets: Sequence[Target]) -> str:
        """Operations act on the queue of their first target (the others may be elsewhere)."""
        first = targets[0]
        return first.job.queue if isinstance(first, Attempt) else self.queue_of[first]

    @staticmethod
    def _for_engine(targets: Sequence[Target]) -> list[uuid.UUID | Job]:
        return [t.job if isinstance(t, Attempt) else t for t in targets]

    @staticmethod
    def _for_model(targets: Sequence[Target]) -> list[uuid.UUID | Fence]:
        return [t.fence if isinstance(t, Attempt) else t for t in targets]

    def due_queues(self) -> list[str]:
        """Work queues where the model has a queued job that is due now (or may be)."""
        due = {
            job.queue
            for job in self.model.all_jobs()
            if job.state in (JobState.CREATED, JobState.RETRY) and job.start_after <= self.model.now
        }
        return [q for q in WORK_QUEUES if q in due] or list(WORK_QUEUES)

    def state_of(self, handle: Target) -> JobState | None:
        """The model's state of the job a handle names (None once deleted)."""
        if isinstance(handle, Attempt):
            job = self.model.get_job(handle.job.queue, handle.job.id)
        else:
            job = self.model.get_job(self.queue_of[handle], handle)
        return None if job is None else job.state

    def _name(self, job_id: uuid.UUID | None) -> str:
        return "?" if job_id is None else self.label.get(job_id, str(job_id))

    # -- sending ---------------------------------------------------------------------------

    @initialize(target=jobs, q0=BATCH, q2=BATCH)
    def send_first(self, q0: list[dict[str, Any]], q2: list[dict[str, Any]]) -> Any:
        """Every run starts with jobs in both queues."""
        return multiple(*self._send("q0", q0), *self._send("q2", q2))

    @rule(target=jobs, queue=st.sampled_from(WORK_QUEUES), specs=BATCH)
    def send(self, queue: str, specs: list[dict[str, Any]]) -> Any:
        """``send`` for one job, ``send_many`` for several (they then share ``created_on``,
        so ``rank``, the id's high bits, orders them). A job's data is its number."""
        return multiple(*self._send(queue, specs))

    def _send(self, queue: str, specs: list[dict[str, Any]]) -> list[uuid.UUID]:
        batch = []
        for spec in specs:
            job_id = self._new_id(spec["rank"])
            batch.append((job_id, len(self.label) - 1, spec["options"]))
        expected = self._model(
            self.model.send_many, queue, [(i, d, JobOptions(**o)) for i, d, o in batch]
        )
        got: list[uuid.UUID | None]
        if len(batch) == 1:
            ((job_id, data, options),) = batch
            got = [self.store.send(queue, data, id=job_id, **options)]
        else:
            got = self.store.send_many(queue, [{"data": d, "id": i, **o} for i, d, o in batch])
        assert got == expected
        sent = [job_id for job_id in got if job_id is not None]
        for job_id in sent:
            self.queue_of[job_id] = queue
        self.handles += sent
        return sent

    # -- pub/sub ---------------------------------------------------------------------------

    @rule(queue=st.sampled_from(WORK_QUEUES), on=st.booleans())
    def subscribe(self, queue: str, on: bool) -> None:
        """Subscribe a work queue to the event, or unsubscribe it."""
        if on:
            self.store.subscribe(EVENT, queue)
            self.subscribed.add(queue)
        else:
            assert self.store.unsubscribe(EVENT, queue) is (queue in self.subscribed)
            self.subscribed.discard(queue)

    @rule(target=jobs)
    def publish(self) -> Any:
        """One job to each subscribed queue, in one statement (the model: one send each;
        a publish puts one job in a queue, so its random id orders nothing)."""
        data = len(self.label)
        got = self.store.publish(EVENT, data)
        queues = sorted(self.subscribed)
        assert len(got) == len(queues)
        for queue, job_id in zip(queues, got, strict=True):
            self.label[job_id] = f"jobs_{len(self.label)}"
            assert self._model(self.model.send_many, queue, [(job_id, data, JobOptions())]) == [
                job_id
            ]
            self.queue_of[job_id] = queue
        self.handles += got
        return multiple(*got)

    # -- schedules -------------------------------------------------------------------------

    @initialize(
        name=st.sampled_from(WORK_QUEUES),
        data=st.integers(0, 3),
        missed=st.sampled_from(("skip", "once")),
    )
    def schedule_first(self, name: str, data: int, missed: str) -> None:
        """Every run starts with a schedule that fires every minute of the cron clock."""
        self.schedule(name, "", SCHEDULE_CRONS[0], data, missed)

    @rule(
        name=st.sampled_from(WORK_QUEUES),
        key=st.sampled_from(SCHEDULE_KEYS),
        cron=st.sampled_from(SCHEDULE_CRONS),
        data=st.integers(0, 3),
        missed=st.sampled_from(("skip", "once")),
    )
    def schedule(self, name: str, key: str, cron: str, data: int, missed: str) -> None:
        """Create or replace a schedule; ``schedules()`` lists what the model holds."""
        self.store.schedule(name, cron, data, key=key, missed=missed)
        self.schedules.schedule(name, key, cron, data, missed)
        (stored,) = [s for s in self.store.schedules() if (s.name, s.key) == (name, key)]
        self.schedules.created(name, key, stored.created_on)
        self._check_schedules()

    @rule(name=st.sampled_from(WORK_QUEUES), key=st.sampled_from(SCHEDULE_KEYS))
    def unschedule(self, name: str, key: str) -> None:
        """Remove a schedule: True exactly when the model had it."""
        assert self.store.unschedule(name, key) is self.schedules.unschedule(name, key)
        self._check_schedules()

    def _check_schedules(self) -> None:
        found = self.store.schedules()
        listed = [(s.name, s.key, s.cron, s.data, s.missed.value) for s in found]
        assert listed == self.schedules.listed()
        floors = {(s.name, s.key): s.last_slot or s.created_on for s in found}
        assert floors == self.schedules.floors, "last slots (else creation times) differ"

    @rule(target=jobs, seconds=st.sampled_from(CRON_STEPS))
    def fire_schedules(self, seconds: int) -> Any:
        """Move the cron clock, then fire: the same slots (exactly one job each, its id the
        slot's), the same count, or the same refusal of a slot that came round again."""
        self.cron_now += dt.timedelta(seconds=seconds)
        due = self.schedules.due(self.cron_now)
        try:
            expected = self._model(self.schedules.fire, self.model, self.cron_now)
        except JobConflict:
            try:
                self.store.fire_schedules(now=self.cron_now)
            except JobConflict:
                event("fire_schedules: a slot came round again, refused")
                self._check_schedules()
                return multiple()
            raise AssertionError("the engine fired a slot whose job exists") from None
        assert self.store.fire_schedules(now=self.cron_now) == expected
        event(f"fire_schedules: {'fired' if expected else 'nothing due'}")
        self._check_schedules()
        fired = [self.schedules.slot_id(name, key, slot) for name, key, slot in due]
        for (name, _key, _slot), job_id in zip(due, fired, strict=True):
            self.label[job_id] = f"jobs_{len(self.label)}"
            self.queue_of[job_id] = name
        self.handles += fired
        return multiple(*fired)

    # -- pause ------------------------------------------------------------------------------

    @rule(queue=st.sampled_from(WORK_QUEUES), paused=st.booleans())
    def pause(self, queue: str, paused: bool) -> None:
        """``pause_queue`` / ``resume_queue``: fetch hands out nothing while paused."""
        if paused:
            self.model.pause_queue(queue)
            self.store.pause_queue(queue)
        else:
            self.model.resume_queue(queue)
            self.store.resume_queue(queue)

    # -- fetching and settling -------------------------------------------------------------

    @precondition(_some(JobState.CREATED, JobState.RETRY))
    @rule(target=attempts, queue=FETCH_QUEUE, batch_size=st.integers(1, 5))
    def fetch(self, queue: str, batch_size: int) -> Any:
        """Claim jobs; each fetched attempt can later settle it (fenced) or be stale."""
        expected = self._model(self.model.fetch, queue, batch_size)
        got = self.store.fetch(queue, batch_size=batch_size)
        return self._fetched(queue, got, expected)

    def _fetched(self, queue: str, got: list[Job], expected: list[uuid.UUID]) -> Any:
        """Check fetched jobs against the model's; each becomes an attempt handle."""
        assert [self._name(j.id) for j in got] == [self._name(i) for i in expected], (
            "fetch returned other jobs (or another order) than the model"
        )
        for job in got:
            model_job = self.model.get_job(queue, job.id)
            assert model_job is not None
            for field in ("state", "retry_count", "retry_limit", "priority", "data"):
                mine, theirs = getattr(job, field), getattr(model_job, field)
                assert mine == theirs, (
                    f"fetched {self._name(job.id)}: {field} engine={mine!r} model={theirs!r}"
                )
        fetched = [Attempt(j, self.model.fence(queue, j.id)) for j in got]
        self.handles += fetched
        return multiple(*fetched)

    @rule(target=attempts, job=jobs)
    def reread(self, job: uuid.UUID) -> Any:
        """``get_job``: a fence of the job's current attempt (fresh after an advance)."""
        queue = self.queue_of[job]
        got = self.store.get_job(queue, job)
        expected = self.model.get_job(queue, job)
        assert (got is None) == (expected is None), f"{self._name(job)} exists on one side only"
        if got is None or expected is None:
            return multiple()
        attempt = Attempt(got, expected.fence())
        self.handles.append(attempt)
        return multiple(attempt)

    @precondition(_some(JobState.ACTIVE))
    @rule(ids=ids_for(JobState.ACTIVE), output=OUTPUTS)
    def complete(self, ids: list[Target], output: Any) -> None:
        """Complete by id or fenced attempt."""
        queue = self._queue(ids)
        expected = self._model(self.model.complete, queue, self._for_model(ids), output)
        assert self.store.complete(queue, self._for_engine(ids), output) == expected

    @precondition(_some(JobState.ACTIVE))
    @rule(
        target=attempts,
        ids=ids_for(JobState.ACTIVE),
        output=OUTPUTS,
        batch_size=st.integers(1, 3),
    )
    def complete_and_fetch(self, ids: list[Target], output: Any, batch_size: int) -> Any:
        """A worker's step: complete, then fetch from the same queue, in one call."""
        queue = self._queue(ids)
        completed = self._model(self.model.complete, queue, self._for_model(ids), output)
        expected = self._model(self.model.fetch, queue, batch_size)
        got = self.store.complete_and_fetch(
            queue, self._for_engine(ids), output, batch_size=batch_size
        )
        assert got.completed == completed, "complete_and_fetch completed another count"
        return self._fetched(queue, got.jobs, expected)

    @precondition(_some(JobState.CREATED, JobState.RETRY, JobState.ACTIVE))
    @rule(ids=ids_for(JobState.ACTIVE), error=ERRORS)
    def fail(self, ids: list[Target], error: Any) -> None:
        """Fail by id or fenced attempt: retry, or failed (+ dead letter in q0)."""
        queue = self._queue(ids)
        expected = self._model(self.model.fail, queue, self._for_model(ids), error)
        assert self.store.fail(queue, self._for_engine(ids), error) == expected

    @precondition(_some(JobState.ACTIVE))
    @rule(ids=ids_for(JobState.ACTIVE), seconds=st.sampled_from([0, 30, 7200]))
    def snooze(self, ids: list[Target], seconds: int) -> None:
        """Snooze by id or fenced attempt: back to retry, no attempt spent."""
        queue = self._queue(ids)
        expected = self._model(self.model.snooze, queue, self._for_model(ids), seconds)
        assert self.store.snooze(queue, self._for_engine(ids), seconds) == expected

    @precondition(_some(JobState.CREATED, JobState.RETRY, JobState.ACTIVE))
    @rule(ids=ids_for(JobState.CREATED, JobState.RETRY, JobState.ACTIVE))
    def cancel(self, ids: list[Target]) -> None:
        """Cancel queued or active jobs."""
        queue = self._queue(ids)
        expected = self._model(self.model.cancel, queue, self._for_model(ids))
        assert self.store.cancel(queue, self._for_engine(ids)) == expected

    @precondition(_some(JobState.CANCELLED))
    @rule(ids=ids_for(JobState.CANCELLED))
    def resume(self, ids: list[Target]) -> None:
        """Resume cancelled jobs."""
        queue = self._queue(ids)
        expected = self._model(self.model.resume, queue, self._for_model(ids))
        assert self.store.resume(queue, self._for_engine(ids)) == expected

    @precondition(_some(JobState.FAILED))
    @rule(ids=ids_for(JobState.FAILED))
    def retry(self, ids: list[Target]) -> None:
        """Give failed jobs one more attempt."""
        queue = self._queue(ids)
        expected = self._model(self.model.retry, queue, self._for_model(ids))
        assert self.store.retry(queue, self._for_engine(ids)) == expected

    @precondition(_some(*JobState))
    @rule(ids=ids_for(*JobState))
    def delete(self, ids: list[Target]) -> None:
        """Delete jobs in any state."""
        queue = self._queue(ids)
        expected = self._model(self.model.delete_jobs, queue, self._for_model(ids))
        assert self.store.delete_jobs(queue, self._for_engine(ids)) == expected

    @precondition(_some(JobState.ACTIVE))
    @rule(ids=ids_for(JobState.ACTIVE))
    def touch(self, ids: list[Target]) -> None:
        """Heartbeat active jobs."""
        queue = self._queue(ids)
        expected = self._model(self.model.touch, queue, self._for_model(ids))
        assert self.store.touch(queue, self._for_engine(ids)) == expected

    # -- flows and job queries (issue 12) ---------------------------------------------------

    @rule(
        target=jobs,
        shape=st.sampled_from(["chain", "fan-in", "fan-out"]),
        queues=st.lists(st.sampled_from(WORK_QUEUES), min_size=3, max_size=3),
        delay=st.sampled_from([None, 14]),
    )
    def flow(self, shape: str, queues: list[str], delay: int | None) -> Any:
        """A flow of three jobs: a -> b -> c, or c waiting for a and b, or b and c for a;
        the last job may keep a start delay for after its release."""
        depends = {
            "chain": [[], ["a"], ["b"]],
            "fan-in": [[], [], ["a", "b"]],
            "fan-out": [[], ["a"], ["a"]],
        }[shape]
        steps: list[dict[str, Any]] = []
        for ref, queue, parents in zip("abc", queues, depends, strict=True):
            job_id = self._new_id()
            step: dict[str, Any] = {
                "ref": ref,
                "queue": queue,
                "data": len(self.label) - 1,
                "id": job_id,
            }
            if parents:
                step["depends_on"] = parents
            steps.append(step)
        if delay is not None:
            steps[-1]["start_after"] = delay
        expected = self._model(self.model.flow, steps)
        assert self.store.flow(steps) == expected
        for step in steps:
            self.queue_of[step["id"]] = step["queue"]
        got = [step["id"] for step in steps]
        self.handles += got
        return multiple(*got)

    @precondition(_some(JobState.CREATED, JobState.RETRY, JobState.ACTIVE))
    @rule(ids=ids_for(JobState.CREATED, JobState.RETRY), output=OUTPUTS)
    def complete_queued(self, ids: list[Target], output: Any) -> None:
        """complete(include_queued=True): queued jobs too (releasing their dependents)."""
        queue = self._queue(ids)
        expected = self._model(self.model.complete, queue, self._for_model(ids), output, True)
        got = self.store.complete(queue, self._for_engine(ids), output, include_queued=True)
        assert got == expected

    @rule(queue=st.sampled_from(WORK_QUEUES), queued=st.booleans())
    def find_jobs(self, queue: str, queued: bool) -> None:
        """find_jobs lists the same jobs, oldest first."""
        expected = [self._name(j.id) for j in self.model.find_jobs(queue, queued=queued)]
        got = [self._name(j.id) for j in self.store.find_jobs(queue, queued=queued)]
        assert got == expected

    @rule(job=jobs)
    def update(self, job: uuid.UUID) -> None:
        """update the data of a job by id: only while it is queued."""
        queue = self.queue_of[job]
        data = {"updated": len(self.label)}
        assert self.store.update(queue, data, id=job) == self.model.update(queue, data, id=job)

    @rule(job=jobs)
    def dependencies(self, job: uuid.UUID) -> None:
        """get_dependencies / get_dependents name the same jobs."""
        queue = self.queue_of[job]
        for name in ("get_dependencies", "get_dependents"):
            expected = {self._name(j.id) for j in getattr(self.model, name)(queue, job)}
            got = {self._name(j.id) for j in getattr(self.store, name)(queue, job)}
            assert got == expected, name

    # -- time and maintenance --------------------------------------------------------------

    @rule()
    def maintain(self) -> None:
        """Expiry, heartbeat timeouts, retention and deletion: the same report."""
        expected = self._model(self.model.maintain)
        assert self.store.maintain() == expected

    @rule(seconds=st.sampled_from(ADVANCES), maintain=st.booleans())
    def advance(self, seconds: int, maintain: bool) -> None:
        """Let time pass on both sides, then maybe run maintenance as a supervisor would.

        Skipped if a backoff retry's due time (or keep_until) would be left undecided."""
        self.model.slack = self._elapsed() + SLACK_MARGIN
        undecided = self.model.undecided(after=seconds)
        if undecided:
            note(f"advance({seconds}) skipped: {'; '.join(undecided)}")
            return
        self.store.advance(seconds)
        self.model.advance(seconds)
        self.schedules.advance(seconds)
        if maintain:
            self.maintain()

    # -- the check -------------------------------------------------------------------------

    @invariant()
    def engine_and_model_agree(self) -> None:
        """Every job agrees: fields, timestamps set or not and their ages, dead letters."""
        rows = [_engine_row(r) for r in self.store.job_rows()]
        drift = self._elapsed() + SLACK_MARGIN
        problems: list[str] = []
        engine_jobs = {(r["queue"], r["id"]): r for r in rows if r["source_id"] is None}
        model_jobs = {(j.queue, j.id): j for j in self.model.all_jobs() if j.source_id is None}
        for key in sorted(engine_jobs.keys() | model_jobs.keys()):
            name = f"{self._name(key[1])} in {key[0]}"
            if key not in model_jobs:
                problems.append(f"{name}: in the engine only ({engine_jobs[key]['state']})")
            elif key not in engine_jobs:
                problems.append(f"{name}: in the model only ({model_jobs[key].state.value})")
            else:
                problems += self._differences(name, engine_jobs[key], model_jobs[key], drift)
        sources = {r["source_id"] for r in rows if r["source_id"] is not None}
        sources |= {j.source_id for j in self.model.all_jobs() if j.source_id is not None}
        for source in sorted(sources):
            engine_copies = sorted(
                (r for r in rows if r["source_id"] == source), key=lambda r: -r["created_on"]
            )
            model_copies = self.model.dead_letters(source)
            name = f"dead letter of {self._name(source)}"
            if len(engine_copies) != len(model_copies):
                problems.append(
                    f"{name}: {len(engine_copies)} copies in the engine, "
                    f"{len(model_copies)} in the model"
                )
                continue
            for row, job in zip(engine_copies, model_copies, strict=True):
                problems += self._differences(name, row, job, drift)
        assert not problems, "engine and model disagree:\n  " + "\n  ".join(problems)

    def _differences(
        self, name: str, row: dict[str, Any], job: ModelJob, drift: float
    ) -> list[str]:
        """How an engine row differs from the model's job (ages within the clocks' drift)."""
        out = []
        expected = _model_row(job)
        for field in FIELDS:
            if row[field] != expected[field]:
                out.append(f"{name}: {field} engine={row[field]!r} model={expected[field]!r}")
        now = self.model.now
        for field in TIMESTAMPS:
            value = getattr(job, field)
            if (row[field] is None) != (value is None):
                out.append(f"{name}: {field} engine={row[field]!r} model={value!r}")
                continue
            if value is None:
                continue
            if value == BLOCKED or row[field] < -1e9:
                if not (value == BLOCKED and row[field] < -1e9):
                    out.append(f"{name}: {field} waiting in a flow on one side only")
                continue
            latest = {"start_after": job.start_after_latest, "keep_until": job.keep_until_latest}
            youngest = (now - latest.get(field, value)).total_seconds()
            oldest = (now - value).total_seconds()
            if not youngest - 0.05 <= row[field] <= oldest + drift:
                out.append(
                    f"{name}: {field} is {row[field]:.2f}s old in the engine, "
                    f"{youngest:g}..{oldest:g}s in the model"
                )
        return out


SETTINGS = settings(
    max_examples=int(os.environ.get("ALKSTORE_MODEL_EXAMPLES", examples(25))),
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)


def test_engine_agrees_with_the_model(alkstore_store: Any) -> None:
    run_state_machine_as_test(functools.partial(ModelMachine, alkstore_store), settings=SETTINGS)  # type: ignore[arg-type]
