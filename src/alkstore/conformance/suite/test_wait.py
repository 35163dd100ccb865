"""Waiting for a result: ``store.wait`` returns the finished job, woken by a notification
where the engine has LISTEN/NOTIFY (docs/workers.md, "Waiting for a result")."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from alkstore import InvalidOptions, Job, JobNotFound, JobState, WaitTimeout
from alkstore import waiting as waiting_module

from .test_worker import FAST
from .workers import work


def _later(action: Callable[[], object]) -> threading.Thread:
    """Run ``action`` in a thread (the test joins it)."""
    thread = threading.Thread(target=action)
    thread.start()
    return thread


def _active(store: Any, queue: str) -> Job:
    job: Job
    (job,) = store.fetch(queue)
    return job


def test_wait_returns_the_completed_job_with_its_output(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", {"n": 2})
    job = _active(alkstore_store, "q")
    thread = _later(lambda: alkstore_store.complete("q", job, {"twice": 4}))
    done = alkstore_store.wait("q", job_id, timeout=30)
    thread.join()
    assert done.id == job_id and done.state is JobState.COMPLETED
    assert done.output == {"twice": 4}


def test_wait_returns_a_job_failed_for_good_with_its_errors(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=1)
    job_id = alkstore_store.send("q", 1)

    def fail_twice():
        for message in ("one", "two"):
            (job,) = alkstore_store.fetch("q", ignore_start_after=True)
            alkstore_store.fail("q", job, {"message": message})

    thread = _later(fail_twice)
    done = alkstore_store.wait("q", job_id, timeout=30)
    thread.join()
    assert done.state is JobState.FAILED
    assert [e.message for e in done.errors] == ["one", "two"]


def test_wait_returns_a_cancelled_job(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    thread = _later(lambda: alkstore_store.cancel("q", job_id))
    assert alkstore_store.wait("q", job_id, timeout=30).state is JobState.CANCELLED
    thread.join()


def test_a_finished_job_is_returned_at_once(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    alkstore_store.complete("q", _active(alkstore_store, "q"), "out")
    assert alkstore_store.wait("q", job_id, timeout=0.001).output == "out"


def test_wait_times_out_with_a_timeout_error(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    with pytest.raises(WaitTimeout) as caught:
        alkstore_store.wait("q", job_id, timeout=0.2)
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.job.id == job_id and caught.value.job.state is JobState.CREATED
    assert str(job_id) in str(caught.value)
    assert alkstore_store.get_job("q", job_id).state is JobState.CREATED  # left alone


def test_a_job_that_does_not_exist_is_a_clear_error(alkstore_store):
    alkstore_store.create_queue("q")
    missing = uuid.uuid4()
    with pytest.raises(JobNotFound) as caught:
        alkstore_store.wait("q", missing, timeout=5)
    assert str(missing) in str(caught.value) and isinstance(caught.value, LookupError)


def test_a_job_deleted_while_waited_for_is_a_clear_error(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    thread = _later(lambda: alkstore_store.delete_jobs("q", job_id))
    with pytest.raises(JobNotFound):
        alkstore_store.wait("q", job_id, timeout=30)
    thread.join()


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), True, "5", None])
def test_bad_timeouts_are_refused(alkstore_store, timeout):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    with pytest.raises(InvalidOptions) as caught:
        alkstore_store.wait("q", job_id, timeout=timeout)
    assert caught.value.field == "timeout"


def test_many_waits_at_once_each_get_their_own_job(alkstore_store):
    alkstore_store.create_queue("q")
    ids = alkstore_store.send_many("q", [{"data": i} for i in range(5)])
    results: dict[uuid.UUID, Job] = {}

    def wait_for(job_id: uuid.UUID) -> Callable[[], None]:
        def waiter() -> None:
            results[job_id] = alkstore_store.wait("q", job_id, timeout=30)

        return waiter

    waiters = [_later(wait_for(i)) for i in ids]
    with work(alkstore_store, "q", lambda job, ctx: job.data * 10, concurrency=2, **FAST):
        for waiter in waiters:
            waiter.join()
    assert {i: results[i].output for i in ids} == {i: n * 10 for n, i in enumerate(ids)}


def _expire(store: Any, job: Job) -> object:
    store.advance(61)  # past the queue's expire_seconds
    return store.maintain()


FINISHES: dict[str, Callable[[Any, Job], object]] = {
    "complete": lambda store, job: store.complete("q", job, "woken"),
    "complete a flow parent": lambda store, job: store.complete("q", job, "woken"),
    "complete a queued job": lambda store, job: store.complete(
        "q", job.id, "woken", include_queued=True
    ),
    "complete_and_fetch": lambda store, job: store.complete_and_fetch("q", job, "woken"),
    "fail": lambda store, job: store.fail("q", job, {"message": "woken"}),
    "expire": _expire,
    "cancel": lambda store, job: store.cancel("q", job.id),
}
"""Each statement that finishes a job, which notifies its waiters (schema version 15)."""
WOKEN: dict[str, tuple[JobState, Callable[[Job], object], object]] = {
    "complete": (JobState.COMPLETED, lambda job: job.output, "woken"),
    "complete a flow parent": (JobState.COMPLETED, lambda job: job.output, "woken"),
    "complete a queued job": (JobState.COMPLETED, lambda job: job.started_on, None),
    "complete_and_fetch": (JobState.COMPLETED, lambda job: job.output, "woken"),
    "fail": (JobState.FAILED, lambda job: job.errors[-1].message, "woken"),
    "expire": (JobState.FAILED, lambda job: job.errors[-1].message, "job timed out"),
    "cancel": (JobState.CANCELLED, lambda job: job.retry_count, 0),
}
"""What the waiter gets from each finish: the state, and a field of the job with its value."""


@pytest.mark.requires("listen_notify", "row_triggers")
@pytest.mark.parametrize("finish", sorted(FINISHES))
def test_a_notification_wakes_the_wait(alkstore_store, monkeypatch, finish):
    if alkstore_store._store._results is None:
        pytest.skip("this store has no connection to listen on (PGlite's one shared session)")
    if alkstore_store.driver == "pg8000":
        pytest.skip("pg8000 cannot wait for notifications: its waits read again")
    # Reads again only at its deadline: before it, only the notification wakes the wait.
    monkeypatch.setattr(waiting_module, "POLL_FIRST", 60.0)
    monkeypatch.setattr(waiting_module, "POLL_MAX_NOTIFIED", 60.0)
    paused = threading.Event()
    found_early: list[bool] = []
    outcome = waiting_module.Waiting.outcome

    def noted(self, job):
        found = outcome(self, job)
        if isinstance(found, Job):
            found_early.append(time.monotonic() < self.deadline)
        elif self.listened is not None:
            paused.set()  # the listener listens and this read marked the job
        return found

    monkeypatch.setattr(waiting_module.Waiting, "outcome", noted)
    alkstore_store.create_queue("q", retry_limit=0, expire_seconds=60)
    if finish == "complete a flow parent":  # its completion also releases the child
        flow = [{"ref": "a", "queue": "q", "data": 1}]
        flow.append({"ref": "b", "queue": "q", "data": 2, "depends_on": ["a"]})
        job_id = alkstore_store.flow(flow)["a"]
    else:
        job_id = alkstore_store.send("q", 1)
    if finish == "complete a queued job":
        job = alkstore_store.get_job("q", job_id)
    else:
        job = _active(alkstore_store, "q")
    assert job.id == job_id

    def finish_once_paused():
        assert paused.wait(30)
        FINISHES[finish](alkstore_store, job)

    thread = _later(finish_once_paused)
    done = alkstore_store.wait("q", job_id, timeout=30)
    thread.join()
    state, field, value = WOKEN[finish]
    assert (done.state, field(done)) == (state, value)
    assert found_early == [True], "the wait found the job only at its deadline: not notified"
