"""The worker runtime: ``store.work()``, graceful stop, cancellation, batches, heartbeats,
transactional workers, the supervisor's claimed pass, in-process wake-ups."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from alkstore import InvalidOptions, JobState, QueueNotFound
from alkstore.conformance.harness import StoreHandle
from alkstore.core.contracts import worker_runtime
from alkstore.core.plans import MAX_SERIALIZATION_RETRIES
from alkstore.worker import WorkerEvent, WorkOptions

from .conftest import eventually
from .workers import execute, side_table, work

FAST = {"poll_interval": 0.05, "watch_interval": 0.05, "maintenance_interval": 0.2}


def _state(alkstore_store: StoreHandle, queue: str, job_id: uuid.UUID) -> JobState | None:
    job = alkstore_store.get_job(queue, job_id)
    return None if job is None else job.state


def test_handler_output_completes_jobs(alkstore_store):
    alkstore_store.create_queue("q")
    with work(alkstore_store, "q", lambda job, ctx: {"twice": job.data * 2}, concurrency=3, **FAST):
        ids = alkstore_store.send_many("q", [{"data": i} for i in range(7)])
        eventually(lambda: all(_state(alkstore_store, "q", i) is JobState.COMPLETED for i in ids))
    assert [alkstore_store.get_job("q", i).output for i in ids] == [
        {"twice": 2 * i} for i in range(7)
    ]


def test_handler_exception_fails_job_with_name_message_stack(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)

    def handler(job, ctx):
        raise ValueError(f"bad {job.data}")

    with work(alkstore_store, "q", handler, **FAST):
        job_id = alkstore_store.send("q", 7)
        eventually(lambda: _state(alkstore_store, "q", job_id) is JobState.FAILED)
    output = alkstore_store.get_job("q", job_id).output
    assert output["name"] == "ValueError" and output["message"] == "bad 7"
    assert "Traceback" in output["stack"] and "ValueError: bad 7" in output["stack"]


def test_unstorable_output_fails_the_job(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    with work(alkstore_store, "q", lambda job, ctx: {1, 2}, **FAST):
        job_id = alkstore_store.send("q", 1)
        eventually(lambda: _state(alkstore_store, "q", job_id) is JobState.FAILED)
    assert alkstore_store.get_job("q", job_id).output["name"] == "InvalidOptions"


def test_graceful_stop_lets_the_running_handler_finish(alkstore_store):
    alkstore_store.create_queue("q")
    started = threading.Event()

    def handler(job, ctx):
        started.set()
        assert ctx.cancelled.wait(30), "stop never reached the handler"
        return "finished after stop"

    worker = work(alkstore_store, "q", handler, **FAST)
    job_id = alkstore_store.send("q", 1)
    assert started.wait(30)
    worker.stop(timeout=30)
    job = alkstore_store.get_job("q", job_id)
    assert job.state is JobState.COMPLETED and job.output == "finished after stop"


def test_stop_timeout_fails_a_stuck_job_so_it_retries(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=2)
    started, release, returned = threading.Event(), threading.Event(), threading.Event()

    def handler(job, ctx):
        started.set()
        try:
            release.wait(30)
            return "too late"
        finally:
            returned.set()

    worker = work(alkstore_store, "q", handler, **FAST)
    job_id = alkstore_store.send("q", 1)
    assert started.wait(30)
    worker.stop(timeout=0.2)
    job = alkstore_store.get_job("q", job_id)
    assert job.state is JobState.RETRY and job.output["name"] == "WorkerStopped"
    release.set()
    assert returned.wait(30)
    # The late completion is fenced to the attempt that stop gave up on.
    eventually(lambda: alkstore_store.get_job("q", job_id).state is JobState.RETRY)
    assert alkstore_store.get_job("q", job_id).output["name"] == "WorkerStopped"


def test_stop_loses_nothing(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    ids = alkstore_store.send_many("q", [{"data": i} for i in range(40)])
    worker = work(alkstore_store, "q", lambda job, ctx: job.data, concurrency=4, **FAST)
    eventually(lambda: alkstore_store.queue_stats("q").counts[JobState.COMPLETED] >= 5)
    worker.stop(timeout=30)
    states = {_state(alkstore_store, "q", i) for i in ids}
    assert JobState.ACTIVE not in states
    assert states <= {JobState.COMPLETED, JobState.CREATED}


def test_cancellation_reaches_the_running_handler(alkstore_store):
    alkstore_store.create_queue("q")
    started, saw = threading.Event(), threading.Event()

    def handler(job, ctx):
        started.set()
        if ctx.cancelled.wait(30):
            saw.set()

    with work(alkstore_store, "q", handler, **FAST):
        job_id = alkstore_store.send("q", 1)
        assert started.wait(30)
        assert alkstore_store.cancel("q", job_id) == 1
        assert saw.wait(30)
    assert _state(alkstore_store, "q", job_id) is JobState.CANCELLED


def test_expiry_reaches_the_handler_through_the_supervisor(alkstore_store):
    alkstore_store.create_queue("q", expire_seconds=60, retry_limit=0)
    started, saw = threading.Event(), threading.Event()

    def handler(job, ctx):
        started.set()
        if ctx.cancelled.wait(30):
            saw.set()

    with work(alkstore_store, "q", handler, **FAST):
        job_id = alkstore_store.send("q", 1)
        assert started.wait(30)
        alkstore_store.advance(61)
        assert saw.wait(30)
    job = alkstore_store.get_job("q", job_id)
    assert job.state is JobState.FAILED and job.output == {"message": "job timed out"}


def test_the_default_supervisor_expires_a_job_about_a_second_after_its_deadline(alkstore_store):
    """The default cadence claims a maintenance pass every second, and the supervisor alone
    (no maintain() here) fails a job once the controllable clock is past its expiry. The
    10 s poll deadline only bounds a failure on a loaded machine: how soon it happens is
    the cadence's, asserted above, not a timing measured by the test."""
    assert WorkOptions().maintenance_interval <= 1.0
    alkstore_store.create_queue("q", expire_seconds=60, retry_limit=0)
    started, release = threading.Event(), threading.Event()

    def handler(job, ctx):
        started.set()
        release.wait(30)

    with work(alkstore_store, "q", handler, poll_interval=0.05):
        job_id = alkstore_store.send("q", 1)
        assert started.wait(30)
        alkstore_store.advance(61)
        eventually(lambda: _state(alkstore_store, "q", job_id) is JobState.FAILED, timeout=10)
        release.set()
    assert alkstore_store.get_job("q", job_id).output == {"message": "job timed out"}


def test_running_jobs_are_heartbeaten(alkstore_store):
    alkstore_store.create_queue("q", heartbeat_seconds=10, retry_limit=0)
    started, release = threading.Event(), threading.Event()

    def handler(job, ctx):
        started.set()
        release.wait(30)

    with work(alkstore_store, "q", handler, **FAST):
        job_id = alkstore_store.send("q", 1)
        assert started.wait(30)
        # Each step leaves the latest heartbeat 4 s short of the 10 s limit (the worker's own
        # maintenance runs every 0.2 s: a heartbeat late by a second on a loaded machine
        # must not expire the job), and 12 s pass in all: alive only through the heartbeats.
        alkstore_store.advance(6)
        shifted = alkstore_store.get_job("q", job_id).heartbeat_on
        eventually(lambda: alkstore_store.get_job("q", job_id).heartbeat_on > shifted)
        alkstore_store.advance(6)
        assert alkstore_store.maintain().heartbeat_expired == 0
        release.set()
        eventually(lambda: _state(alkstore_store, "q", job_id) is JobState.COMPLETED)


def test_ctx_heartbeat_says_whether_the_job_still_runs(alkstore_store):
    alkstore_store.create_queue("q")
    started, release, answers = threading.Event(), threading.Event(), []

    def handler(job, ctx):
        answers.append(ctx.heartbeat())
        started.set()
        release.wait(30)
        answers.append(ctx.heartbeat())

    with work(alkstore_store, "q", handler, **FAST):
        job_id = alkstore_store.send("q", 1)
        assert started.wait(30)
        alkstore_store.cancel("q", job_id)
        release.set()
        eventually(lambda: len(answers) == 2)
    assert answers == [True, False]


def test_batch_handler_gets_lists_and_settles_per_job(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    sizes = []

    def handler(jobs, ctx):
        sizes.append(len(jobs))
        out = {}
        for job in jobs:
            if job.data % 3 == 0:
                out[job.id] = RuntimeError(f"no {job.data}")
            elif job.data % 3 == 1:
                out[job.id] = job.data * 10
        return out

    ids = alkstore_store.send_many("q", [{"data": i} for i in range(9)])
    with work(alkstore_store, "q", handler, batch=True, batch_size=5, **FAST):
        eventually(
            lambda: (
                alkstore_store.queue_stats("q").queued == 0
                and alkstore_store.queue_stats("q").counts[JobState.ACTIVE] == 0
            )
        )
    assert sum(sizes) == 9 and max(sizes) <= 5
    jobs = [alkstore_store.get_job("q", i) for i in ids]
    for i, job in enumerate(jobs):
        if i % 3 == 0:
            assert job.state is JobState.FAILED and job.output["message"] == f"no {i}"
        else:
            assert job.state is JobState.COMPLETED
            assert job.output == (i * 10 if i % 3 == 1 else None)


def test_batch_handler_none_completes_all_and_raising_fails_all(alkstore_store):
    alkstore_store.create_queue("ok")
    alkstore_store.create_queue("bad", retry_limit=0)
    good = alkstore_store.send_many("ok", [{"data": i} for i in range(4)])
    bad = alkstore_store.send_many("bad", [{"data": i} for i in range(4)])

    def boom(jobs, ctx):
        raise KeyError("whole batch")

    with (
        work(alkstore_store, "ok", lambda jobs, ctx: None, batch=True, batch_size=10, **FAST),
        work(alkstore_store, "bad", boom, batch=True, batch_size=10, **FAST),
    ):
        eventually(lambda: all(_state(alkstore_store, "ok", i) is JobState.COMPLETED for i in good))
        eventually(lambda: all(_state(alkstore_store, "bad", i) is JobState.FAILED for i in bad))
    assert alkstore_store.get_job("bad", bad[0]).output["name"] == "KeyError"


def test_send_from_the_same_store_wakes_the_worker(alkstore_store):
    alkstore_store.create_queue("q")
    with work(alkstore_store, "q", lambda job, ctx: "ran", poll_interval=60.0, maintenance=False):
        first = alkstore_store.send("q", 1)
        eventually(lambda: _state(alkstore_store, "q", first) is JobState.COMPLETED, timeout=20)
        # The worker now waits for its next poll, a minute away: only a wake-up can make it
        # fetch the second job within the deadline.
        second = alkstore_store.send("q", 2)
        eventually(lambda: _state(alkstore_store, "q", second) is JobState.COMPLETED, timeout=20)


def test_transactional_worker_commits_writes_with_completion(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    table, written = side_table(alkstore_store)
    side = f"INSERT INTO {table} (id) VALUES ($1)"

    def handler(job, ctx):
        execute(ctx, side, job.id)
        if job.data == "fail":
            raise RuntimeError("roll it back")
        return "done"

    with work(alkstore_store, "q", handler, transactional=True, **FAST):
        ok = alkstore_store.send("q", "ok")
        bad = alkstore_store.send("q", "fail")
        eventually(lambda: _state(alkstore_store, "q", ok) is JobState.COMPLETED)
        eventually(lambda: _state(alkstore_store, "q", bad) is JobState.FAILED)
    assert written() == [str(ok)]
    assert alkstore_store.get_job("q", bad).output["message"] == "roll it back"


CONFLICT = "DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$"
"""A statement the server fails with a serialization failure, as a conflicting transaction
under SERIALIZABLE would make it fail."""


def _raises_serialization_failures(alkstore_store: StoreHandle) -> None:
    if not alkstore_store.engine.capabilities.plpgsql:
        pytest.skip(f"{alkstore_store.engine.name}: raising SQLSTATE 40001 needs a DO block")


def test_a_serialization_failure_runs_a_transactional_call_again(alkstore_store):
    _raises_serialization_failures(alkstore_store)
    alkstore_store.create_queue("q", retry_limit=0)
    table, written = side_table(alkstore_store)
    calls = []

    def handler(job, ctx):
        calls.append(job.id)
        execute(ctx, f"INSERT INTO {table} (id) VALUES ($1)", job.id)
        if len(calls) == 1:
            execute(ctx, CONFLICT)
        return "done"

    with work(alkstore_store, "q", handler, transactional=True, **FAST):
        job_id = alkstore_store.send("q", {})
        eventually(lambda: _state(alkstore_store, "q", job_id) is JobState.COMPLETED, timeout=20)
    assert calls == [job_id, job_id]
    assert alkstore_store.get_job("q", job_id).output == "done"
    assert written() == [str(job_id)]  # the first run's insert rolled back with it


def test_a_transactional_call_that_never_serializes_fails_its_job(alkstore_store):
    _raises_serialization_failures(alkstore_store)
    alkstore_store.create_queue("q", retry_limit=0)
    calls = []

    def handler(job, ctx):
        calls.append(job.id)
        execute(ctx, CONFLICT)

    with work(alkstore_store, "q", handler, transactional=True, **FAST):
        job_id = alkstore_store.send("q", {})
        eventually(lambda: _state(alkstore_store, "q", job_id) is JobState.FAILED, timeout=30)
    assert len(calls) == 1 + MAX_SERIALIZATION_RETRIES
    assert "conflict" in alkstore_store.get_job("q", job_id).output["message"]


def test_transactional_with_heartbeat_needs_the_capability(alkstore_store):
    alkstore_store.create_queue("q", heartbeat_seconds=30)
    if alkstore_store.engine.capabilities.transactional_heartbeat:
        work(alkstore_store, "q", lambda job, ctx: None, transactional=True, **FAST).stop()
    else:
        with pytest.raises(InvalidOptions, match="transactional_heartbeat"):
            work(alkstore_store, "q", lambda job, ctx: None, transactional=True, **FAST)


def test_transactional_refuses_a_job_level_heartbeat_without_the_capability(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    ran: list[object] = []
    with work(
        alkstore_store, "q", lambda job, ctx: ran.append(job.data), transactional=True, **FAST
    ):
        job_id = alkstore_store.send("q", "beats", heartbeat_seconds=30)
        eventually(
            lambda: _state(alkstore_store, "q", job_id) in (JobState.COMPLETED, JobState.FAILED)
        )
    job = alkstore_store.get_job("q", job_id)
    if alkstore_store.engine.capabilities.transactional_heartbeat:
        assert (job.state, ran) == (JobState.COMPLETED, ["beats"]), job.output
    else:
        assert (job.state, ran) == (JobState.FAILED, [])
        assert "lacks transactional_heartbeat" in job.output["message"]


@pytest.mark.requires("transactional_heartbeat", "several_sessions")
def test_a_transactional_job_completes_though_its_heartbeats_land_meanwhile(alkstore_store):
    """What the capability promises: the worker's own heartbeats, committed by another
    session while the handler's transaction is open, do not make its completion fail."""
    alkstore_store.create_queue("q", retry_limit=0, heartbeat_seconds=30)
    started = threading.Event()
    release = threading.Event()

    def handler(job, ctx):
        # A transactional handler writes through its connection: its transaction's
        # snapshot is taken now, before the heartbeats below.
        execute(ctx, "SELECT 1")
        started.set()
        release.wait(10)

    with work(alkstore_store, "q", handler, transactional=True, **FAST):
        job_id = alkstore_store.send("q", "beats")
        eventually(started.is_set)
        first = alkstore_store.get_job("q", job_id).heartbeat_on
        eventually(lambda: alkstore_store.get_job("q", job_id).heartbeat_on > first)
        release.set()
        eventually(
            lambda: _state(alkstore_store, "q", job_id) in (JobState.COMPLETED, JobState.FAILED)
        )
    job = alkstore_store.get_job("q", job_id)
    assert job.state is JobState.COMPLETED, job.output


def test_work_checks_its_arguments(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions, match="batch_size"):
        work(alkstore_store, "q", lambda job, ctx: None, batch_size=5)
    with pytest.raises(InvalidOptions, match="concurrency"):
        work(alkstore_store, "q", lambda job, ctx: None, concurrency=0)
    with pytest.raises(InvalidOptions, match="poll_intervall"):
        work(alkstore_store, "q", lambda job, ctx: None, poll_intervall=1)
    with pytest.raises(QueueNotFound):
        work(alkstore_store, "nope", lambda job, ctx: None)


@pytest.mark.requires("several_sessions")
def test_one_maintenance_pass_per_interval_across_stores(alkstore_store):
    siblings = [alkstore_store.sibling() for _ in range(4)]
    claimers = [alkstore_store, *siblings]
    try:
        with ThreadPoolExecutor(len(claimers)) as pool:
            won = list(
                pool.map(
                    lambda s: s.run_plan(
                        worker_runtime(s.engine).claim_pass(60.0, uuid.uuid4().hex)
                    ),
                    claimers,
                )
            )
        assert won.count(True) == 1
        assert not alkstore_store.run_plan(
            worker_runtime(alkstore_store.engine).claim_pass(60.0, "late")
        )
    finally:
        for sibling in siblings:
            sibling.close()


@pytest.mark.requires("listen_notify", "several_sessions")
def test_sends_from_another_process_wake_the_worker_through_notify(alkstore_store):
    options = alkstore_store.backend.options
    if options.get("pooler") and not options.get("listen_dsn"):
        # A transaction pooler hands the LISTEN connection's server session to others
        # between transactions: wake-ups need listen_dsn straight to the server, which a
        # run on a user's --alkstore-dsn cannot know (throwaway PgBouncer runs set it).
        pytest.skip("behind a user's transaction pooler: no direct listen_dsn to LISTEN on")
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("r")
    events: list[str] = []
    other = alkstore_store.sibling()
    try:
        with work(
            alkstore_store,
            "q",
            lambda job, ctx: "ran",
            poll_interval=60.0,
            maintenance=False,
            on_event=lambda e: events.append(e.kind),
        ):
            first = alkstore_store.send("q", 1)
            eventually(lambda: _state(alkstore_store, "q", first) is JobState.COMPLETED, timeout=20)
            if alkstore_store.driver == "pg8000":
                # pg8000 cannot wait for notifications: the worker says so and polls.
                eventually(lambda: "listen_unsupported" in events)
                return
            # The next poll is a minute away: only a notification can wake the worker now.
            sent = other.send("q", 2)
            eventually(lambda: _state(alkstore_store, "q", sent) is JobState.COMPLETED, timeout=20)
            other.subscribe("e", "q")
            (published,) = other.publish("e", 3)
            eventually(
                lambda: _state(alkstore_store, "q", published) is JobState.COMPLETED, timeout=20
            )
            cancelled = other.send("r", 4)
            other.cancel("r", cancelled)
            moved = other.send("q", 5, start_after=3600)
            other.cancel("q", moved)
            # resume keeps a start still ahead (spec §3): let it pass, so the resume makes
            # the job runnable at once and only its notification can wake the worker.
            alkstore_store.advance(3600)
            other.resume("q", moved)
            eventually(lambda: _state(alkstore_store, "q", moved) is JobState.COMPLETED, timeout=20)
        assert "listen_error" not in events
    finally:
        other.close()


def test_backlog_and_slow_query_events(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.send_many("q", [{"data": i} for i in range(5)])
    events: list[WorkerEvent] = []
    gate = threading.Event()

    def handler(job, ctx):
        gate.wait(30)

    options = {**FAST, "warning_size": 2, "slow_query_seconds": 1e-9, "on_event": events.append}
    with work(alkstore_store, "q", handler, **options):
        eventually(lambda: any(e.kind == "backlog" for e in events))
        gate.set()
    backlog = next(e for e in events if e.kind == "backlog")
    assert backlog.queue == "q" and backlog.detail["warning_size"] == 2
    assert backlog.detail["queued"] > 2
    assert any(e.kind == "slow_query" and e.detail["operation"] == "fetch" for e in events)


def test_a_running_worker_process_is_listed_until_its_workers_stop(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("r")
    assert alkstore_store.worker_processes() == []
    with (
        work(alkstore_store, "q", lambda job, ctx: None, **FAST),
        work(alkstore_store, "r", lambda job, ctx: None, maintenance=False, **FAST),
    ):
        (listed,) = eventually(alkstore_store.worker_processes)
        assert (listed.host, listed.pid) == (socket.gethostname(), os.getpid())
        assert listed.owner.startswith(f"{listed.host}:{listed.pid}:")
        assert listed.queues in (("q",), ("q", "r")) and listed.workers in (1, 2)
        assert listed.started_on <= listed.seen_on < listed.expires_on
        # The process's supervisor claims the passes: it ran the latest one.
        eventually(lambda: alkstore_store.worker_processes()[0].ran_last_pass)
    assert alkstore_store.worker_processes() == []  # its last worker stopped: forgotten
