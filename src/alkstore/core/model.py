"""An in-memory reference implementation of the behaviour contract: the test oracle.

:class:`Model` keeps queues and jobs in dictionaries and implements spec §3 to §5 and the
fencing rule of §9 in plain Python, one small method per store operation, so a test can
drive an engine and the model with the same calls and demand the same results. It performs
no I/O and never reads the wall clock.

Time
    The model's clock is :attr:`Model.now`. :meth:`Model.advance` works like the conformance
    harness's ``advance``: it shifts every stored timestamp back by ``seconds`` and leaves
    ``now`` alone, which for every deadline is the same as ``seconds`` passing; fences name
    an attempt by ``retry_count``, so they survive the shift as they survive real time.
    :meth:`Model.tick` moves ``now`` forward instead.

Uncertain times
    Two things make a real engine's times differ from the model's:

    * the retry backoff has random jitter (spec §4): after a backoff retry the model only
      knows ``start_after`` (and ``keep_until``, which moves with it) as an interval
      ``[start_after, start_after_latest]`` from :func:`~.retry.retry_delay_bounds` (unless
      it is given a ``jitter`` source, as the in-memory engine gives it: then it picks the
      delay in that interval, as an engine does);
    * an engine reads ``now()`` on the server per statement, so between two events its clock
      runs ahead of the model's by the real time that passed. :attr:`Model.slack` is an
      upper bound on that lead, in seconds: the engine's clock is taken to be anywhere in
      ``[now, now + slack]`` relative to the model's timestamps.

    Every time-dependent decision (is a job due, expired, heartbeat-expired, past
    ``keep_until`` or past its deletion time) is taken only when it comes out the same for
    every time in those intervals; otherwise the operation raises :class:`AmbiguousTiming`
    and changes nothing. A test keeps the model and the engine provably in agreement by
    moving its clock only in steps that leave every pending decision clear:
    ``model.undecided(after=seconds)`` lists what an advance of ``seconds`` would leave
    undecided, so the test advances only when it is empty (and uses deadlines well away
    from the times it can reach, so that real time passing during the test never matters).

Dead letters
    A dead-letter copy gets a new id that the engine generates; the model cannot know it, so
    it gives the copy an id of its own (a UUIDv7 of the model's clock and the count of copies
    made: stable across runs and in creation order). Compare copies by
    ``source_id`` (:meth:`Model.dead_letters`), not by id. The fetch order of several copies
    made by one statement depends on those unknown ids. ``redrive`` takes the maker of the
    new jobs' ids (an engine makes its own, so a comparison goes by ``source_id`` or data).

The in-memory engine (``engines/memory``) runs this model behind the store's API, with the
wall clock as :attr:`Model.now` and a random jitter: so it also implements what a test of an
engine against the model leaves out (throttle slots, ``list_jobs``, ``queue_stats``,
``redrive``, each maintenance duty on its own).

Where the contract is silent the model follows the PostgreSQL engine, and says so:

* a job id is unique per queue (the engine's key is ``(queue, id)``);
* a fence matches while the job is active in the fetched attempt (same ``retry_count``,
  which every fetch after the first raises); once the attempt ended (completed, failed,
  expired, cancelled) the old ``Job`` matches nothing, even before the job is fetched again;
* ``cancel``, ``resume``, ``retry`` and ``delete_jobs`` ignore fences and act by id;
* operations on ids in a queue that does not exist return 0; ``send`` and ``fetch`` raise
  :class:`~.errors.QueueNotFound`.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
from cronsim import CronSim

from .attempts import MAX_ERRORS, attempt_error, snooze_seconds
from .errors import (
    FlowRefused,
    InvalidOptions,
    JobConflict,
    QueueExists,
    QueueInUse,
    QueueNotFound,
)
from .ids import uuid7_at
from .options import GroupLimit, JobOptions, Policy, QueueOptions, dump_json
from .records import FailedAttempt, Job, MaintenanceReport, QueueStats
from .retry import retry_delay_bounds
from .schedules import EPOCH, SKIP_GRACE, Missed, slot_id
from .states import ACTIVE, FINISHED, QUEUED, UNFINISHED, JobState
from .targets import Targets
from .validation import INT_MAX

TIMED_OUT: dict[str, str] = {"message": "job timed out"}
"""The output of a job failed by expiry."""

HEARTBEAT_TIMED_OUT: dict[str, str] = {"message": "heartbeat timed out"}
"""The output of a job failed by a heartbeat timeout."""

START: dt.datetime = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
"""The default reading of a new model's clock."""


class AmbiguousTiming(Exception):
    """A decision depends on a time the model only knows as an interval (see the module doc).

    The operation that raised changed nothing.
    """


@attrs.frozen
class Fence:
    """An attempt of a job, as a worker holds it: the model's counterpart of a fetched ``Job``.

    It matches while the job is active with the same ``retry_count``.
    """

    id: uuid.UUID
    retry_count: int


ModelId = uuid.UUID | str | Fence | Job
"""One target: a bare id (UUID or its text), or a fenced attempt (:class:`Fence` or ``Job``)."""

ModelIds = ModelId | Iterable[ModelId] | Targets
"""What the operations on ids accept: one target, an iterable of them, or ``Targets``."""


@attrs.define
class ModelJob:
    """One job as the model stores it: the fields of :class:`~.records.Job`, mutable, plus two
    of the model's own (``start_after_latest`` and ``seq``)."""

    id: uuid.UUID
    queue: str
    data: Any
    state: JobState
    priority: int
    retry_count: int
    retry_limit: int
    retry_delay: int
    retry_backoff: bool
    retry_delay_max: int | None
    expire_seconds: int
    heartbeat_seconds: int | None
    retention_seconds: int
    deletion_seconds: int
    singleton_key: str | None
    group_id: str | None
    group_tier: str | None
    start_after: dt.datetime
    created_on: dt.datetime
    started_on: dt.datetime | None
    completed_on: dt.datetime | None
    heartbeat_on: dt.datetime | None
    keep_until: dt.datetime
    output: Any
    source_queue: str | None
    source_id: uuid.UUID | None
    source_retry_count: int | None
    source_root_id: uuid.UUID | None
    source_created_on: dt.datetime | None
    source_output: Any
    dead_letter: str | None
    start_after_latest: dt.datetime
    """Latest possible ``start_after``: equal to it unless a backoff jitter is unknown.
    ``keep_until`` is uncertain by the same amount."""
    seq: int
    """Number of the statement that created the job: orders jobs created at the same model
    time the way the engine's distinct ``created_on`` values do."""
    singleton_on: dt.datetime | None = None
    """Start of the job's throttle slot (``singleton_seconds``), None when not throttled."""
    trace_context: dict[str, str] | None = None
    """The sender's trace context: passed through (a dead-letter copy keeps its source's)."""
    errors: list[FailedAttempt] = attrs.Factory(list)
    """The failed attempts, oldest first (at most ``MAX_ERRORS``; a dead-letter copy starts
    with its source's)."""

    @property
    def keep_until_latest(self) -> dt.datetime:
        """Latest possible ``keep_until`` (it moves with ``start_after``); ``keep_until``
        itself where that leaves the datetime range (a row planted with an extreme time)."""
        try:
            return self.keep_until + (self.start_after_latest - self.start_after)
        except OverflowError:
            return self.keep_until

    def fence(self) -> Fence:
        """The current attempt of this job."""
        return Fence(self.id, self.retry_count)

    def fetch_key(self) -> tuple[int, dt.datetime, int, uuid.UUID]:
        """Fetch order: priority DESC, created_on, id (``seq`` breaks ``created_on`` ties
        between statements, as the engine's clock would)."""
        return (-self.priority, self.created_on, self.seq, self.id)

    def to_job(self) -> Job:
        """This job as a :class:`~.records.Job` (the model's own fields dropped)."""
        fields = attrs.asdict(self, recurse=False)
        del fields["start_after_latest"], fields["seq"], fields["singleton_on"]
        fields["errors"] = tuple(self.errors)
        return Job(**fields)


def _json_value(field: str, value: Any) -> Any:
    """``value`` as it comes back from a JSON column (validated like the store does)."""
    text = dump_json(field, value)
    return None if text is None else json.loads(text)


def _seconds(value: float) -> dt.timedelta:
    return dt.timedelta(seconds=value)


BLOCKED: dt.datetime = dt.datetime.max.replace(tzinfo=dt.UTC)
"""``start_after`` and ``keep_until`` of a job waiting in a flow: as the store reads the
database's ``'infinity'``, which time never moves."""


NO_SOURCE: dict[str, Any] = dict.fromkeys(
    (
        "source_queue",
        "source_id",
        "source_retry_count",
        "source_root_id",
        "source_created_on",
        "source_output",
    )
)
"""The lineage fields of a job that is no dead-letter copy (all unset)."""


LATEST: dt.datetime = BLOCKED - dt.timedelta(days=1)
"""The latest time the model computes: a retry of a row stored with a delay no valid options
give (docs/guarantees.md) waits until then, instead of overflowing."""


def _later(moment: dt.datetime, seconds: float) -> dt.datetime:
    """``moment`` plus ``seconds``, at most :data:`LATEST`."""
    try:
        return min(moment + _seconds(seconds), LATEST)
    except OverflowError:
        return LATEST


def _shifted(moment: dt.datetime, shift: dt.timedelta) -> dt.datetime:
    return moment if moment == BLOCKED else moment - shift


@attrs.define
class Waiting:
    """A job waiting in a flow: how many parents it still waits for, and its start."""

    parents: list[tuple[str, uuid.UUID]]
    waiting: int
    start_at: dt.datetime | None
    delay: float | None


def _contains(value: Any, wanted: Any) -> bool:
    """JSON containment, as ``jsonb @>``: objects by key, arrays by element, scalars equal."""
    if isinstance(wanted, dict):
        return isinstance(value, dict) and all(
            k in value and _contains(value[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return isinstance(value, list) and all(
            any(_contains(item, w) for item in value) for w in wanted
        )
    return bool(value == wanted) and isinstance(value, bool) == isinstance(wanted, bool)


def _targets(ids: ModelIds) -> list[tuple[uuid.UUID, int | None]]:
    """Normalise ``ids`` like :func:`~.targets.targets`, also accepting :class:`Fence`."""
    if isinstance(ids, Targets):
        return list(zip(ids.ids, ids.retry_counts, strict=True))
    items: Iterable[object]
    if isinstance(ids, uuid.UUID | str | Fence | Job):
        items = [ids]
    elif isinstance(ids, Iterable):
        items = ids
    else:
        raise InvalidOptions("ids", ids, "must be an id, a Fence, a Job, or an iterable of them")
    out: list[tuple[uuid.UUID, int | None]] = []
    for item in items:
        if isinstance(item, Fence | Job):
            out.append((item.id, item.retry_count))
        elif isinstance(item, uuid.UUID):
            out.append((item, None))
        elif isinstance(item, str):
            try:
                out.append((uuid.UUID(item), None))
            except ValueError:
                raise InvalidOptions(
                    "ids", item, "must be a UUID, a UUID string or a Job"
                ) from None
        else:
            raise InvalidOptions("ids", item, "must be a UUID, a UUID string or a Job")
    return out


class Model:
    """The contract in memory: queues, jobs, a clock, and one method per store operation.

    Methods take the arguments of the matching :class:`alkstore.Store` method, except that
    ``send`` is given the job id (so model and engine share ids), ``fail`` takes the JSON
    value that ends up in ``output`` (for an exception, what the store makes of it) and
    ``fetch`` returns ids (use :meth:`fence` for the attempt). Every method returns what the
    store returns and raises the store's errors.
    """

    def __init__(
        self,
        now: dt.datetime = START,
        *,
        slack: float = 0.0,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        self.now: dt.datetime = now
        self.jitter: Callable[[], float] | None = jitter
        """Where the backoff jitter comes from: None leaves it unknown (an interval, see the
        module doc); a function returning a fraction in [0, 1) picks the delay in
        ``retry_delay_bounds`` at that fraction, as an engine does."""
        """The model's clock: the time every operation happens at."""
        self.slack: float = slack
        """Seconds the engine's clock may run ahead of the model's (see the module doc)."""
        self.queues: dict[str, QueueOptions] = {}
        """Queue settings by name."""
        self.jobs: dict[tuple[str, uuid.UUID], ModelJob] = {}
        """Every job, by ``(queue, id)``."""
        self._seq = 0
        self._dead_letters_made = 0
        self.waiting: dict[tuple[str, uuid.UUID], Waiting] = {}
        """Jobs sent in flows with parents, by ``(queue, id)`` (kept once released, as the
        dependency rows are)."""
        self.paused: set[str] = set()
        """Queues that hand out nothing (``pause_queue``)."""

    # -- clock -----------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass by shifting every stored timestamp back (as the harness's
        ``advance`` does)."""
        shift = _seconds(seconds)
        for job in self.jobs.values():
            job.start_after = _shifted(job.start_after, shift)
            job.start_after_latest = _shifted(job.start_after_latest, shift)
            job.created_on -= shift
            job.keep_until = _shifted(job.keep_until, shift)
            if job.started_on is not None:
                job.started_on -= shift
            if job.completed_on is not None:
                job.completed_on -= shift
            if job.heartbeat_on is not None:
                job.heartbeat_on -= shift
            if job.singleton_on is not None:
                job.singleton_on -= shift
            job.errors = [attrs.evolve(e, at=e.at - shift) for e in job.errors]

    def tick(self, seconds: float) -> None:
        """Let ``seconds`` pass by moving :attr:`now` forward."""
        self.now += _seconds(seconds)

    # -- queues ----------------------------------------------------------------------------

    def create_queue(self, name: str, options: QueueOptions | None = None) -> None:
        """Create a queue; its dead-letter queue must exist and may not be itself."""
        options = QueueOptions() if options is None else options
        options.check_dead_letter(name)
        if name in self.queues:
            raise QueueExists(name)
        if options.dead_letter is not None and options.dead_letter not in self.queues:
            raise QueueNotFound(options.dead_letter, field="dead_letter")
        self.queues[name] = options

    def update_queue(self, name: str, changes: Mapping[str, Any]) -> QueueOptions:
        """Change a queue's settings (jobs already sent keep theirs); returns the new ones."""
        if name not in self.queues:
            raise QueueNotFound(name)
        new = self.queues[name].updated(changes)
        new.check_dead_letter(name)
        if new.dead_letter is not None and new.dead_letter not in self.queues:
            raise QueueNotFound(new.dead_letter, field="dead_letter")
        self.queues[name] = new
        return new

    def delete_queue(self, name: str) -> None:
        """Delete a queue and its jobs; refused while another queue dead-letters into it."""
        if name not in self.queues:
            raise QueueNotFound(name)
        users = sorted(q for q, o in self.queues.items() if o.dead_letter == name)
        if users:
            raise QueueInUse(
                f"queue {name!r} is the dead-letter queue of {', '.join(map(repr, users))}"
            )
        del self.queues[name]
        for key in [k for k in self.jobs if k[0] == name]:
            del self.jobs[key]

    # -- reading ---------------------------------------------------------------------------

    def get_job(self, queue: str, job_id: uuid.UUID) -> ModelJob | None:
        """The job ``job_id`` of ``queue``, or None."""
        return self.jobs.get((queue, job_id))

    def all_jobs(self) -> list[ModelJob]:
        """Every job, in every queue."""
        return list(self.jobs.values())

    def fence(self, queue: str, job_id: uuid.UUID) -> Fence:
        """The current attempt of a job (what ``fetch`` or ``get_job`` would hand a worker)."""
        job = self.jobs.get((queue, job_id))
        if job is None:
            raise KeyError(f"no job {job_id} in {queue!r}")
        return job.fence()

    def dead_letters(self, source_id: uuid.UUID) -> list[ModelJob]:
        """The dead-letter copies made of job ``source_id``, oldest first."""
        copies = [j for j in self.jobs.values() if j.source_id == source_id]
        return sorted(copies, key=lambda j: (j.created_on, j.seq))

    # -- sending ---------------------------------------------------------------------------

    def send(
        self,
        queue: str,
        job_id: uuid.UUID | None,
        data: Any = None,
        options: JobOptions | None = None,
    ) -> uuid.UUID | None:
        """Create a job (``job_id``, else ``options.id``); options resolve job > queue >
        default. None when the queue's policy refuses it."""
        options = JobOptions() if options is None else options
        (sent,) = self.send_many(queue, [(job_id, data, options)])
        return sent

    def send_many(
        self, queue: str, jobs: Sequence[tuple[uuid.UUID | None, Any, JobOptions]]
    ) -> list[uuid.UUID | None]:
        """Create jobs in one statement (all or none): they share ``created_on``, so they
        are fetched in id order among equals. A job the queue's policy refuses is not
        created: None in its place."""
        prepared: list[tuple[uuid.UUID, Any, JobOptions]] = []
        for job_id, data, options in jobs:
            given = job_id if job_id is not None else options.id
            if given is None:
                raise InvalidOptions("id", None, "the model needs the id of every job")
            if options.id is not None and options.id != given:
                raise InvalidOptions("id", options.id, f"differs from job_id {given}")
            prepared.append((given, _json_value("data", data), options))
        ids = [p[0] for p in prepared]
        if len(ids) != len(set(ids)):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise JobConflict(f"id {dup} appears twice in one send")
        if queue not in self.queues:
            raise QueueNotFound(queue)
        for _job_id, _data, options in prepared:
            own = options.dead_letter
            if own == queue:
                raise InvalidOptions("dead_letter", own, "may not be the job's own queue")
            if own is not None and own not in self.queues:
                raise QueueNotFound(own, field="dead_letter")
        if any((queue, i) in self.jobs for i in ids):
            raise JobConflict(f"a job with one of these ids already exists in {queue!r}")
        seq = self._next_seq()
        sent: list[uuid.UUID | None] = []
        for job_id, data, options in prepared:
            throttled, slot = self._throttle_slot(queue, options)
            if throttled or self._policy_refuses(queue, options.singleton_key):
                sent.append(None)
                continue
            sent.append(job_id)
            resolved = options.resolve(self.queues[queue])
            start = options.start_after
            if isinstance(start, dt.datetime):
                start_after = start
            else:
                start_after = self.now + _seconds(start or 0.0)
            if slot is not None and slot > self.now:
                start_after = max(start_after, slot)  # a debounced job waits for its slot
            self.jobs[(queue, job_id)] = ModelJob(
                id=job_id,
                queue=queue,
                data=data,
                state=JobState.CREATED,
                priority=resolved.priority,
                retry_count=0,
                retry_limit=resolved.retry_limit,
                retry_delay=resolved.retry_delay,
                retry_backoff=resolved.retry_backoff,
                retry_delay_max=resolved.retry_delay_max,
                expire_seconds=resolved.expire_seconds,
                heartbeat_seconds=resolved.heartbeat_seconds,
                retention_seconds=resolved.retention_seconds,
                deletion_seconds=resolved.deletion_seconds,
                singleton_key=options.singleton_key,
                group_id=options.group_id,
                group_tier=options.group_tier,
                start_after=start_after,
                created_on=self.now,
                started_on=None,
                completed_on=None,
                heartbeat_on=None,
                keep_until=start_after + _seconds(resolved.retention_seconds),
                output=None,
                **NO_SOURCE,
                dead_letter=options.dead_letter,
                start_after_latest=start_after,
                seq=seq,
                singleton_on=slot,
                trace_context=options.trace_context,
            )
        return sent

    # -- fetching and settling -------------------------------------------------------------

    def fetch(
        self,
        queue: str,
        batch_size: int,
        group_concurrency: GroupLimit | None = None,
        *,
        ignore_start_after: bool = False,
    ) -> list[uuid.UUID]:
        """Claim up to ``batch_size`` due queued jobs; returns their ids in fetch order.

        ``started_on = now``; ``retry_count`` grows by one when the job had started before;
        ``heartbeat_on = now`` for jobs with ``heartbeat_seconds``. ``ignore_start_after``
        also claims jobs not due yet (never a flow job still waiting for its parents).
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidOptions("batch_size", batch_size, "must be an integer >= 1")
        if queue not in self.queues:
            raise QueueNotFound(queue)
        waiting = sorted(
            (j for j in self.jobs.values() if j.queue == queue and j.state in QUEUED),
            key=ModelJob.fetch_key,
        )
        picked = self._claimable(
            queue, waiting, batch_size, group_concurrency, ignore_start_after=ignore_start_after
        )
        for job in picked:
            if job.started_on is not None:
                job.retry_count += 1
            job.state = JobState.ACTIVE
            job.started_on = self.now
            job.heartbeat_on = None if job.heartbeat_seconds is None else self.now
        return [j.id for j in picked]

    def complete(
        self, queue: str, ids: ModelIds, output: Any = None, include_queued: bool = False
    ) -> int:
        """active (with ``include_queued`` also queued) -> completed (fenced), storing
        ``output``; releases the flow jobs that waited for these last. Returns how many
        changed."""
        value = _json_value("output", output)
        states = ACTIVE | QUEUED if include_queued else ACTIVE
        changed = self._select(queue, ids, states, fenced=True)
        for job in changed:
            job.state = JobState.COMPLETED
            job.completed_on = self.now
            job.output = copy.deepcopy(value)
        self._release({(job.queue, job.id) for job in changed})
        return len(changed)

    def fail(self, queue: str, ids: ModelIds, output: Any = None) -> int:
        """queued or active -> retry or failed (fenced); ``output`` is stored as given.

        Dead-letter copies are made of the jobs that end ``failed`` when their queue has one.
        """
        value = _json_value("error", output)
        changed = self._select(queue, ids, UNFINISHED, fenced=True)
        self._fail_all(changed, value)
        return len(changed)

    def snooze(self, queue: str, ids: ModelIds, seconds: float) -> int:
        """active -> retry (fenced), due ``seconds`` from now, without spending an attempt:
        ``retry_limit`` grows by one (at most ``INT_MAX``), as the next fetch raises
        ``retry_count``. A stately job whose key already has a job waiting for its retry is
        left alone (0 for it), as the policy admits one. Returns how many changed."""
        delay = snooze_seconds(seconds)
        changed = 0
        for job in sorted(self._select(queue, ids, ACTIVE, fenced=True), key=lambda j: j.id):
            if self._stately_retry_taken(job):
                continue
            changed += 1
            job.state = JobState.RETRY
            job.retry_limit = min(job.retry_limit + 1, INT_MAX)
            job.start_after = job.start_after_latest = _later(self.now, delay)
            job.keep_until = _later(job.start_after, job.retention_seconds)
        return changed

    def cancel(self, queue: str, ids: ModelIds) -> int:
        """queued or active -> cancelled, ``completed_on = now`` (by id, fences ignored)."""
        changed = self._select(queue, ids, UNFINISHED, fenced=False)
        for job in changed:
            job.state = JobState.CANCELLED
            job.completed_on = self.now
        return len(changed)

    def resume(self, queue: str, ids: ModelIds) -> int:
        """cancelled -> created: due now, or at its ``start_after`` if that is still ahead
        (cancel + resume never skips a pending backoff); ``keep_until`` moves with it."""
        # In id order: of jobs of one key a policy admits only one of, the lowest id moves.
        found = self._select(queue, ids, frozenset({JobState.CANCELLED}), fenced=False)
        changed = []
        for job in sorted(found, key=lambda j: j.id):
            if self._policy_refuses(queue, job.singleton_key):
                continue
            changed.append(job)
            job.state = JobState.CREATED
            job.completed_on = None
            job.start_after = max(job.start_after, self.now)
            job.start_after_latest = max(job.start_after_latest, self.now)
            if job.start_after != BLOCKED:
                job.keep_until = job.start_after + _seconds(job.retention_seconds)
        return len(changed)

    def retry(self, queue: str, ids: ModelIds) -> int:
        """failed -> retry, due now, with one more attempt (``retry_limit + 1``)."""
        found = self._select(queue, ids, frozenset({JobState.FAILED}), fenced=False)
        changed = []
        for job in sorted(found, key=lambda j: j.id):
            if self._policy_refuses(queue, job.singleton_key, JobState.RETRY):
                continue
            changed.append(job)
            job.state = JobState.RETRY
            job.retry_limit += 1
            job.completed_on = None
            self._restart_now(job)
        return len(changed)

    def delete_jobs(self, queue: str, ids: ModelIds) -> int:
        """Delete jobs in any state (by id)."""
        changed = self._select(queue, ids, frozenset(JobState), fenced=False)
        for job in changed:
            del self.jobs[(job.queue, job.id)]
        return len(changed)

    def touch(self, queue: str, ids: ModelIds) -> int:
        """Heartbeat active jobs (fenced): ``heartbeat_on = now``."""
        changed = self._select(queue, ids, ACTIVE, fenced=True)
        for job in changed:
            job.heartbeat_on = self.now
        return len(changed)

    # -- flows -----------------------------------------------------------------------------

    def flow(self, steps: Sequence[Mapping[str, Any]]) -> dict[str, uuid.UUID]:
        """Send a flow (each step also carries its ``id``, so model and engine share ids):
        all or nothing; a step with ``depends_on`` waits for those refs' jobs to complete."""
        saved = (copy.deepcopy(self.jobs), self._seq)
        refs = {step["ref"]: (step["queue"], step["id"]) for step in steps}
        skip = ("ref", "queue", "data", "depends_on", "id")
        try:
            # One statement per queue, in the order of the queues' names (as the engine).
            for queue in sorted({step["queue"] for step in steps}):
                chosen = [s for s in steps if s["queue"] == queue]
                batch = [
                    (
                        s["id"],
                        s.get("data"),
                        JobOptions(**{k: v for k, v in s.items() if k not in skip}),
                    )
                    for s in chosen
                ]
                sent = self.send_many(queue, batch)
                refused = [s["ref"] for s, i in zip(chosen, sent, strict=True) if i is None]
                if refused:
                    raise FlowRefused(refused)
        except Exception:
            self.jobs, self._seq = saved
            raise
        # What deleted jobs whose ids the flow reuses left behind would count for the new ones.
        reused = set(refs.values())
        for key in reused:
            self.waiting.pop(key, None)
        for entry in self.waiting.values():
            entry.parents = [p for p in entry.parents if p not in reused]
        for step in steps:
            parents = [refs[ref] for ref in dict.fromkeys(step.get("depends_on", ()))]
            if not parents:
                continue
            job = self.jobs[(step["queue"], step["id"])]
            start = JobOptions(start_after=step.get("start_after")).start_after
            self.waiting[(job.queue, job.id)] = Waiting(
                parents,
                len(parents),
                start if isinstance(start, dt.datetime) else None,
                start if isinstance(start, float) else None,
            )
            job.start_after = job.start_after_latest = job.keep_until = BLOCKED
        return {ref: job_id for ref, (_queue, job_id) in refs.items()}

    def get_dependencies(self, queue: str, job_id: uuid.UUID) -> list[ModelJob]:
        """The existing jobs job ``job_id`` waits (or waited) for, oldest first."""
        entry = self.waiting.get((queue, job_id))
        found = [self.jobs[p] for p in (entry.parents if entry else []) if p in self.jobs]
        return sorted(found, key=lambda j: (j.created_on, j.seq, j.id))

    def get_dependents(self, queue: str, job_id: uuid.UUID) -> list[ModelJob]:
        """The existing jobs that wait (or waited) for job ``job_id``, oldest first."""
        found = [
            self.jobs[child]
            for child, entry in self.waiting.items()
            if (queue, job_id) in entry.parents and child in self.jobs
        ]
        return sorted(found, key=lambda j: (j.created_on, j.seq, j.id))

    def _release(self, completed: set[tuple[str, uuid.UUID]]) -> None:
        """Count down the flow jobs waiting for ``completed``; release those done waiting."""
        for child, entry in self.waiting.items():
            hits = sum(1 for parent in entry.parents if parent in completed)
            if not hits:
                continue
            entry.waiting -= hits
            job = self.jobs.get(child)
            if entry.waiting != 0 or job is None or job.start_after != BLOCKED:
                continue
            if job.state not in QUEUED:
                continue  # completed while it waited (include_queued): it keeps its start
            start = entry.start_at or self.now + _seconds(entry.delay or 0.0)
            job.start_after = job.start_after_latest = start
            job.keep_until = start + _seconds(job.retention_seconds)

    # -- finding and editing jobs ----------------------------------------------------------

    def find_jobs(
        self,
        queue: str,
        *,
        id: uuid.UUID | None = None,
        key: str | None = None,
        data: Mapping[str, Any] | None = None,
        queued: bool = False,
    ) -> list[ModelJob]:
        """The jobs of ``queue`` matching every filter given, oldest first."""
        if queue not in self.queues:
            raise QueueNotFound(queue)
        wanted = _json_value("data", data)

        def matches(job: ModelJob) -> bool:
            return (
                job.queue == queue
                and (id is None or job.id == id)
                and (key is None or job.singleton_key == key)
                and (wanted is None or _contains(job.data, wanted))
                and (not queued or job.state in QUEUED)
            )

        found = [j for j in self.jobs.values() if matches(j)]
        return sorted(found, key=lambda j: (j.created_on, j.seq, j.id))

    def update(
        self,
        queue: str,
        data: Any,
        *,
        id: uuid.UUID | None = None,
        singleton_key: str | None = None,
        match: str = "newest",
    ) -> int:
        """Replace the data of the queued job(s) chosen; how many changed."""
        return len(self.update_jobs(queue, data, id=id, singleton_key=singleton_key, match=match))

    def update_jobs(
        self,
        queue: str,
        data: Any,
        *,
        id: uuid.UUID | None = None,
        singleton_key: str | None = None,
        match: str = "newest",
    ) -> list[uuid.UUID]:
        """:meth:`update`, returning the ids of the jobs changed, newest first."""
        if queue not in self.queues:
            raise QueueNotFound(queue)
        chosen = [
            j
            for j in self.find_jobs(queue, id=id, queued=True)
            if singleton_key is None or j.singleton_key == singleton_key
        ]
        if match == "newest":
            chosen = chosen[-1:]
        elif match == "oldest":
            chosen = chosen[:1]
        value = _json_value("data", data)
        for job in chosen:
            job.data = copy.deepcopy(value)
        return [job.id for job in reversed(chosen)]

    # -- maintenance -----------------------------------------------------------------------

    def maintain(self) -> MaintenanceReport:
        """One maintenance pass, duty after duty as the store runs them: expiry, heartbeat
        timeouts, retention, deletion."""
        saved = (copy.deepcopy(self.jobs), self._seq, self._dead_letters_made)
        try:
            expired = self.expire()
            silent = self.expire_heartbeats()
            old = self.remove_expired_retention()
            done = self.delete_finished()
        except AmbiguousTiming:
            self.jobs, self._seq, self._dead_letters_made = saved
            raise
        return MaintenanceReport(
            expired=expired, heartbeat_expired=silent, retention_removed=old, deleted=done
        )

    # Each duty of a pass on its own, as the store runs them: every one decides for all of its
    # jobs before it changes any (AmbiguousTiming then leaves everything as it was).

    def expire(self) -> int:
        """Fail the active jobs past their expiry; how many."""
        expired = [j for j in self._all_in(ACTIVE) if self._expired(j)]
        self._fail_all(expired, TIMED_OUT)
        return len(expired)

    def expire_heartbeats(self) -> int:
        """Fail the active jobs whose heartbeat timed out; how many."""
        silent = [j for j in self._all_in(ACTIVE) if self._heartbeat_expired(j)]
        self._fail_all(silent, HEARTBEAT_TIMED_OUT)
        return len(silent)

    def remove_expired_retention(self) -> int:
        """Delete the queued jobs past ``keep_until``; how many."""
        old = [j for j in self._all_in(QUEUED) if self._past_retention(j)]
        for job in old:
            del self.jobs[(job.queue, job.id)]
        return len(old)

    def delete_finished(self) -> int:
        """Delete the finished jobs past their deletion time; how many."""
        done = [j for j in self._all_in(FINISHED) if self._past_deletion(j)]
        for job in done:
            del self.jobs[(job.queue, job.id)]
        return len(done)

    def undecided(self, after: float = 0.0) -> list[str]:
        """The time-dependent decisions that would be ambiguous ``after`` seconds from now
        (empty: every fetch and maintenance pass then has one certain outcome)."""
        found: list[str] = []
        checks = {
            "due": (QUEUED, self._due),
            "expiry": (ACTIVE, self._expired),
            "heartbeat": (ACTIVE, self._heartbeat_expired),
            "retention": (QUEUED, self._past_retention),
            "deletion": (FINISHED, self._past_deletion),
        }
        for job in self.jobs.values():
            for name, (states, check) in checks.items():
                if job.state not in states:
                    continue
                try:
                    check(job, after)
                except AmbiguousTiming:
                    found.append(f"{name} of job {job.id} in {job.queue!r}")
        return found

    # -- internals -------------------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _all_in(self, states: frozenset[JobState]) -> list[ModelJob]:
        return [j for j in self.jobs.values() if j.state in states]

    def _select(
        self, queue: str, ids: ModelIds, states: frozenset[JobState], *, fenced: bool
    ) -> list[ModelJob]:
        """The distinct jobs of ``queue`` in ``states`` that some target matches."""
        chosen: dict[uuid.UUID, ModelJob] = {}
        for job_id, retry_count in _targets(ids):
            job = self.jobs.get((queue, job_id))
            if job is None or job.state not in states or job_id in chosen:
                continue
            if (
                fenced
                and retry_count is not None
                and not (job.state is JobState.ACTIVE and job.retry_count == retry_count)
            ):
                continue
            chosen[job_id] = job
        return list(chosen.values())

    def _restart_now(self, job: ModelJob) -> None:
        job.start_after = job.start_after_latest = self.now
        job.keep_until = self.now + _seconds(job.retention_seconds)

    def _fail_all(self, jobs: list[ModelJob], output: Any) -> None:
        """The shared failing path of ``fail``, expiry and heartbeat timeouts (one statement)."""
        seq = self._next_seq()
        # In id order: of the stately jobs of one key failed at once, the lowest id retries.
        for job in sorted(jobs, key=lambda j: j.id):
            if job.retry_count < job.retry_limit and not self._stately_retry_taken(job):
                low, high = retry_delay_bounds(
                    retry_delay=job.retry_delay,
                    retry_count=job.retry_count,
                    retry_backoff=job.retry_backoff,
                    retry_delay_max=job.retry_delay_max,
                )
                job.state = JobState.RETRY
                if self.jitter is not None:
                    low = high = low + (high - low) * self.jitter()
                job.start_after = _later(self.now, low)
                job.start_after_latest = _later(self.now, high)
                job.keep_until = _later(job.start_after, job.retention_seconds)
                job.completed_on = None
            else:
                job.state = JobState.FAILED
                job.completed_on = self.now
            job.output = copy.deepcopy(output)
            entry = FailedAttempt(job.retry_count + 1, self.now, **attempt_error(output))
            job.errors = [*job.errors, entry][-MAX_ERRORS:]
            dead_letter = job.dead_letter or self.queues[job.queue].dead_letter
            if job.state is JobState.FAILED and dead_letter in self.queues:
                self._dead_letter(job, dead_letter, seq)

    def _dead_letter(self, job: ModelJob, dlq: str, seq: int) -> None:
        """Insert the dead-letter copy of ``job`` into ``dlq`` (settings from the DLQ); a
        copy the DLQ's policy refuses is recorded in the job's output instead."""
        if self._policy_refuses(dlq, job.singleton_key):
            output = job.output if isinstance(job.output, dict) else {"output": job.output}
            job.output = {**output, "dead_letter_refused": dlq}
            return
        self._dead_letters_made += 1
        # Time-ordered as the SQL engines' copies (UUIDv7), and deterministic: the copy's
        # time, then the count of copies made.
        millis = (self.now - EPOCH) // dt.timedelta(milliseconds=1)
        copy_id = uuid7_at(millis, self._dead_letters_made)
        opts = self.queues[dlq]
        self.jobs[(dlq, copy_id)] = ModelJob(
            id=copy_id,
            queue=dlq,
            data=copy.deepcopy(job.data),
            priority=job.priority,
            singleton_key=job.singleton_key,
            **self._fresh_in(opts),
            output=copy.deepcopy(job.output),
            source_queue=job.queue,
            source_id=job.id,
            source_retry_count=job.retry_count,
            source_root_id=job.source_root_id or job.id,
            source_created_on=job.created_on,
            source_output=copy.deepcopy(job.output),
            dead_letter=None,
            start_after_latest=self.now,
            seq=seq,
            trace_context=job.trace_context,
            errors=list(job.errors),
        )

    def _fresh_in(self, opts: QueueOptions) -> dict[str, Any]:
        """The fields of a job made now in a queue with ``opts`` (a dead-letter copy, a
        redriven job): created, no attempt yet, the queue's settings, no group."""
        return {
            "state": JobState.CREATED,
            "retry_count": 0,
            "retry_limit": opts.retry_limit,
            "retry_delay": opts.retry_delay,
            "retry_backoff": opts.retry_backoff,
            "retry_delay_max": opts.retry_delay_max,
            "expire_seconds": opts.expire_seconds,
            "heartbeat_seconds": opts.heartbeat_seconds,
            "retention_seconds": opts.retention_seconds,
            "deletion_seconds": opts.deletion_seconds,
            "group_id": None,
            "group_tier": None,
            "start_after": self.now,
            "created_on": self.now,
            "started_on": None,
            "completed_on": None,
            "heartbeat_on": None,
            "keep_until": self.now + _seconds(opts.retention_seconds),
        }

    def _passed(
        self,
        low: dt.datetime | None,
        high: dt.datetime | None,
        *,
        strict: bool,
        what: str,
        delay: float = 0.0,
        after: float = 0.0,
    ) -> bool:
        """Whether ``moment + delay < engine now`` (``<=`` unless ``strict``) holds for
        every ``moment`` in ``[low, high]`` and every engine clock in
        ``[now + after, now + after + slack]``; a missing moment (SQL NULL) never passes."""
        if low is None or high is None:
            return False
        earliest = self.now + _seconds(after)
        latest = earliest + _seconds(self.slack)
        first, last = low + _seconds(delay), high + _seconds(delay)
        if strict:
            if last < earliest:
                return True
            if first >= latest:
                return False
        else:
            if last <= earliest:
                return True
            if first > latest:
                return False
        raise AmbiguousTiming(
            f"{what or 'a decision'}: between {(first - earliest).total_seconds():+g}s and "
            f"{(last - earliest).total_seconds():+g}s from now, with the engine up to "
            f"{self.slack:g}s ahead"
        )

    def _due(self, job: ModelJob, after: float = 0.0) -> bool:
        return self._passed(
            job.start_after,
            job.start_after_latest,
            strict=False,
            what=f"start of {job.id}",
            after=after,
        )

    def _expired(self, job: ModelJob, after: float = 0.0) -> bool:
        return self._passed(
            job.started_on,
            job.started_on,
            strict=True,
            what=f"expiry of {job.id}",
            delay=job.expire_seconds,
            after=after,
        )

    def _heartbeat_expired(self, job: ModelJob, after: float = 0.0) -> bool:
        if job.heartbeat_seconds is None:
            return False
        return self._passed(
            job.heartbeat_on,
            job.heartbeat_on,
            strict=True,
            what=f"heartbeat of {job.id}",
            delay=job.heartbeat_seconds,
            after=after,
        )

    def _past_retention(self, job: ModelJob, after: float = 0.0) -> bool:
        return self._passed(
            job.keep_until,
            job.keep_until_latest,
            strict=True,
            what=f"retention of {job.id}",
            after=after,
        )

    def _past_deletion(self, job: ModelJob, after: float = 0.0) -> bool:
        if job.deletion_seconds == 0:
            return False
        return self._passed(
            job.completed_on,
            job.completed_on,
            strict=True,
            what=f"deletion of {job.id}",
            delay=job.deletion_seconds,
            after=after,
        )

    # -- policies, limits, groups and pause (issue 12, docs/queues.md) ---------------------

    def pause_queue(self, name: str) -> None:
        """Fetch hands out nothing until :meth:`resume_queue`; sends are accepted."""
        if name not in self.queues:
            raise QueueNotFound(name)
        self.paused.add(name)

    def resume_queue(self, name: str) -> None:
        """Undo :meth:`pause_queue`."""
        if name not in self.queues:
            raise QueueNotFound(name)
        self.paused.discard(name)

    def _policy_refuses(
        self, queue: str, singleton_key: str | None, state: JobState = JobState.CREATED
    ) -> bool:
        """Whether the queue's policy refuses one more job of ``singleton_key`` in ``state``
        (``created`` or ``retry``)."""
        policy = self.queues[queue].policy
        blocking = {
            Policy.SHORT: {JobState.CREATED} & {state},
            Policy.STATELY: {state},
            Policy.EXCLUSIVE: {JobState.CREATED, JobState.RETRY, JobState.ACTIVE},
        }.get(policy)
        if not blocking:
            return False
        key = singleton_key or ""
        return any(
            j.queue == queue and j.state in blocking and _key(j) == key for j in self.jobs.values()
        )

    def _stately_retry_taken(self, job: ModelJob) -> bool:
        """The stately retry bypass: another job of the key already waits for its retry."""
        if self.queues[job.queue].policy is not Policy.STATELY:
            return False
        return any(
            o.queue == job.queue
            and o.id != job.id
            and o.state is JobState.RETRY
            and _key(o) == _key(job)
            for o in self.jobs.values()
        )

    def _claimable(
        self,
        queue: str,
        waiting: list[ModelJob],
        batch_size: int,
        groups: GroupLimit | None,
        *,
        ignore_start_after: bool = False,
    ) -> list[ModelJob]:
        """The jobs a fetch claims from ``waiting`` (queued, in fetch order)."""
        if queue in self.paused:
            return []
        options = self.queues[queue]
        mine = [j for j in self.jobs.values() if j.queue == queue]
        active = [j for j in mine if j.state is JobState.ACTIVE]
        if options.concurrency_limit is not None:
            batch_size = min(batch_size, options.concurrency_limit - len(active))
        policy = options.policy
        fifo = policy is Policy.KEY_STRICT_FIFO
        busy: set[str] = set()
        if fifo:
            busy = {_key(j) for j in mine if j.state in (JobState.ACTIVE, JobState.FAILED)}
            heads: dict[str, ModelJob] = {}
            for job in sorted(waiting, key=lambda j: (j.created_on, j.seq, j.id)):
                heads.setdefault(_key(job), job)
            waiting = [j for j in waiting if heads[_key(j)] is j]
        elif policy in (Policy.SINGLETON, Policy.STATELY):
            busy = {_key(j) for j in active}
        one_per_key = policy in (Policy.SINGLETON, Policy.STATELY, Policy.KEY_STRICT_FIFO)
        taken: dict[str | None, int] = {}
        for job in active:
            taken[job.group_id] = taken.get(job.group_id, 0) + 1
        picked: list[ModelJob] = []
        for job in waiting:
            if len(picked) >= batch_size:
                break
            if _key(job) in busy:
                continue
            limit = None
            if groups is not None and job.group_id is not None:
                tier = job.group_tier
                limit = groups.tiers.get(tier, groups.default) if tier else groups.default
            if limit is not None and taken.get(job.group_id, 0) >= limit:
                continue
            if job.start_after == BLOCKED or not (ignore_start_after or self._due(job)):
                continue
            picked.append(job)
            taken[job.group_id] = taken.get(job.group_id, 0) + 1
            if one_per_key:
                busy.add(_key(job))
        return picked

    # -- throttle, listing, stats and redrive (the in-memory engine, engines/memory) -------
    # Throttle slots start at multiples of ``singleton_seconds`` since the Unix epoch of the
    # model's clock; an engine's slots follow its own clock, so the state machine that
    # compares the model with a database sends no throttled jobs.

    def _throttle_slot(self, queue: str, options: JobOptions) -> tuple[bool, dt.datetime | None]:
        """Whether the throttle refuses a job (its slot, and with ``singleton_next_slot``
        the next one too, is taken), and the slot it goes into (None: not throttled)."""
        seconds = options.singleton_seconds
        if seconds is None:
            return False, None
        key = options.singleton_key or ""
        start = math.floor(self.now.timestamp() / seconds) * seconds
        slots = [start, start + seconds] if options.singleton_next_slot else [start]
        for moment in slots:
            slot = dt.datetime.fromtimestamp(moment, dt.UTC)
            if not any(
                j.queue == queue
                and j.singleton_on == slot
                and _key(j) == key
                and j.state is not JobState.CANCELLED
                for j in self.jobs.values()
            ):
                return False, slot
        return True, None

    def list_jobs(
        self,
        queue: str,
        states: Iterable[JobState] = (),
        limit: int = 100,
        after: uuid.UUID | None = None,
    ) -> list[ModelJob]:
        """Up to ``limit`` jobs of ``queue`` in ``states`` (all when empty) with ids after
        ``after``, in id order."""
        if queue not in self.queues:
            raise QueueNotFound(queue)
        wanted = frozenset(states) or frozenset(JobState)
        found = sorted(
            (
                j
                for j in self.jobs.values()
                if j.queue == queue and j.state in wanted and (after is None or j.id > after)
            ),
            key=lambda j: j.id,
        )
        return found[:limit]

    def queue_stats(self, queue: str) -> QueueStats:
        """Counts per state, and how long the oldest due queued job has waited."""
        if queue not in self.queues:
            raise QueueNotFound(queue)
        counts = dict.fromkeys(JobState, 0)
        due: list[dt.datetime] = []
        for job in self.jobs.values():
            if job.queue != queue:
                continue
            counts[job.state] += 1
            if job.state in QUEUED and job.start_after <= self.now:
                due.append(job.start_after)
        return QueueStats(queue, counts, self.now - min(due) if due else None)

    def redrive(self, dlq: str, to: str | None, limit: int, new_id: Callable[[], uuid.UUID]) -> int:
        """Move up to ``limit`` queued jobs of ``dlq`` (oldest first) to their source queue
        (or ``to``) as fresh jobs with ids from ``new_id``, the target queue's settings and
        its policy (a refused job stays); how many moved."""
        for field, name in (("dlq", dlq), ("to", to)):
            if name is not None and name not in self.queues:
                raise QueueNotFound(name, field=field)
        waiting = sorted(
            (j for j in self.jobs.values() if j.queue == dlq and j.state in QUEUED),
            key=lambda j: (j.created_on, j.seq, j.id),
        )
        picked = [j for j in waiting if (to or j.source_queue) in self.queues][:limit]
        seq = self._next_seq()
        moved = 0
        for job in picked:
            target = to or job.source_queue
            assert target is not None
            if self._policy_refuses(target, None):
                continue
            opts = self.queues[target]
            fresh = attrs.evolve(
                job,
                id=new_id(),
                queue=target,
                data=copy.deepcopy(job.data),
                singleton_key=None,
                **self._fresh_in(opts),
                output=None,
                **NO_SOURCE,
                dead_letter=None,
                start_after_latest=self.now,
                seq=seq,
                singleton_on=None,
                errors=[],
            )
            del self.jobs[(job.queue, job.id)]
            self.jobs[(target, fresh.id)] = fresh
            moved += 1
        return moved


def _key(job: ModelJob) -> str:
    """A job's policy key: a missing ``singleton_key`` is one shared key."""
    return job.singleton_key or ""


@attrs.define
class ModelSchedules:
    """The model of ``schedule``/``unschedule``/``schedules``: one schedule per (name, key),
    a second ``schedule`` of the pair replacing the first (cron, data, missed)."""

    entries: dict[tuple[str, str], tuple[str, Any, str]] = attrs.field(factory=dict)

    def schedule(self, name: str, key: str, cron: str, data: Any, missed: str) -> None:
        """Create or replace the schedule ``(name, key)``."""
        self.entries[(name, key)] = (cron, data, missed)

    def unschedule(self, name: str, key: str) -> bool:
        """Remove it; whether there was one."""
        self.floors.pop((name, key), None)
        return self.entries.pop((name, key), None) is not None

    def listed(self) -> list[tuple[str, str, str, Any, str]]:
        """What ``schedules()`` lists, by name and key: name, key, cron, data, missed."""
        return [(n, k, *self.entries[(n, k)]) for n, k in sorted(self.entries)]

    # -- firing ----------------------------------------------------------------------------

    floors: dict[tuple[str, str], dt.datetime] = attrs.field(factory=dict)
    """(name, key) -> the last slot fired, else when the schedule was created: only slots
    after it may fire. Kept when a schedule is replaced, dropped with it."""

    def created(self, name: str, key: str, created_on: dt.datetime) -> None:
        """A new schedule ``(name, key)`` was stored at ``created_on`` (the engine's clock:
        the model cannot know it); a replaced one keeps its floor."""
        self.floors.setdefault((name, key), created_on)

    def advance(self, seconds: float) -> None:
        """Time passed as the harness's ``advance`` makes it pass: the stored creation times
        and last slots shift back."""
        for pair in self.floors:
            self.floors[pair] -= dt.timedelta(seconds=seconds)

    def due(self, now: dt.datetime) -> list[tuple[str, str, dt.datetime]]:
        """The slot each schedule fires at ``now``, by name and key: the latest slot of its
        cron after its floor and at or before ``now`` (stepped forward from the floor), and
        with ``missed="skip"`` only if at most ``SKIP_GRACE`` old."""
        found = []
        for name, key in sorted(self.entries):
            cron, _data, missed = self.entries[(name, key)]
            latest = None
            for slot in CronSim(cron, self.floors[(name, key)].astimezone(dt.UTC)):
                if slot > now:
                    break
                latest = slot
            if latest is None or (missed == Missed.SKIP and now - latest > SKIP_GRACE):
                continue
            found.append((name, key, latest))
        return found

    slot_id = staticmethod(slot_id)

    def fire(self, model: Model, now: dt.datetime) -> int:
        """``fire_schedules(now=now)``: each due slot moves its schedule's floor and sends
        one job (its id derived from the slot, so a slot that comes round again is refused
        by the job's key: :class:`~.errors.JobConflict`, and nothing of the pass is kept).
        Jobs of one pass share ``created_on`` (one transaction): one ``send_many`` per queue,
        so they are fetched in id order. Returns how many slots fired."""
        due = self.due(now)
        saved = (dict(self.floors), copy.deepcopy(model.jobs), model._seq)
        batches: dict[str, list[tuple[uuid.UUID | None, Any, JobOptions]]] = {}
        for name, key, slot in due:
            self.floors[(name, key)] = slot
            job_id = self.slot_id(name, key, slot)
            batches.setdefault(name, []).append(
                (job_id, self.entries[(name, key)][1], JobOptions())
            )
        try:
            for queue, batch in batches.items():
                model.send_many(queue, batch)
        except Exception:
            self.floors, model.jobs, model._seq = saved
            raise
        return len(due)


__all__ = [
    "HEARTBEAT_TIMED_OUT",
    "TIMED_OUT",
    "AmbiguousTiming",
    "Fence",
    "Model",
    "ModelId",
    "ModelIds",
    "ModelJob",
    "ModelSchedules",
]
