"""Maintenance: expiry, heartbeat timeouts, retention, deletion (spec §3, §8, §9)."""

from __future__ import annotations

from alkstore import JobState, MaintenanceReport


def test_expired_job_comes_back_and_finally_fails(store):
    store.create_queue("dlq")
    store.create_queue("q", expire_seconds=60, retry_limit=1, dead_letter="dlq")
    job_id = store.send("q", 1)
    store.fetch("q")
    store.advance(30)
    assert store.maintain() == MaintenanceReport()
    store.advance(31)
    assert store.maintain().expired == 1
    job = store.get_job("q", job_id)
    assert job.state is JobState.RETRY and job.output == {"message": "job timed out"}
    (again,) = store.fetch("q")
    assert again.id == job_id and again.retry_count == 1
    store.advance(61)
    assert store.maintain().expired == 1
    assert store.get_job("q", job_id).state is JobState.FAILED
    (dead,) = store.fetch("dlq")
    assert dead.source_id == job_id and dead.output == {"message": "job timed out"}


def test_heartbeat_timeout(store):
    store.create_queue("q", heartbeat_seconds=20, retry_limit=0)
    alive = store.send("q", "alive")
    silent = store.send("q", "silent")
    store.fetch("q", batch_size=2)
    store.advance(15)
    assert store.touch("q", alive) == 1
    store.advance(10)
    report = store.maintain()
    assert report.heartbeat_expired == 1 and report.expired == 0
    assert store.get_job("q", alive).state is JobState.ACTIVE
    dead = store.get_job("q", silent)
    assert dead.state is JobState.FAILED and dead.output == {"message": "heartbeat timed out"}


def test_jobs_without_heartbeat_only_expire(store):
    store.create_queue("q", expire_seconds=100)
    store.send("q", 1)
    store.fetch("q")
    store.advance(50)
    assert store.maintain().heartbeat_expired == 0


def test_retention_removes_old_queued_jobs_only(store):
    store.create_queue("q", retention_seconds=100)
    old = store.send("q", "old")
    running = store.send("q", "running", priority=1)
    store.fetch("q")
    store.advance(101)
    fresh = store.send("q", "fresh")
    assert store.maintain().retention_removed == 1
    assert store.get_job("q", old) is None
    assert store.get_job("q", running).state is JobState.ACTIVE
    assert store.get_job("q", fresh) is not None


def test_retention_never_removes_a_job_waiting_for_its_retry(store):
    store.create_queue("q", retention_seconds=100, retry_delay=500)
    job_id = store.send("q", 1)
    store.advance(90)
    store.fail("q", store.fetch("q"))
    store.advance(400)  # past the original keep_until, still before the retry is due
    assert store.maintain().retention_removed == 0
    assert store.get_job("q", job_id).state is JobState.RETRY
    store.advance(101)
    assert [j.id for j in store.fetch("q")] == [job_id]


def test_resume_moves_keep_until(store):
    store.create_queue("q", retention_seconds=100)
    job_id = store.send("q", 1)
    store.cancel("q", job_id)
    store.advance(90)
    store.resume("q", job_id)
    store.advance(50)
    assert store.maintain().retention_removed == 0
    assert store.get_job("q", job_id).state is JobState.CREATED


def test_deletion_of_finished_jobs(store):
    store.create_queue("q", deletion_seconds=60)
    store.create_queue("keep", deletion_seconds=0)
    done, cancelled, waiting = store.send_many("q", [{"data": i} for i in range(3)])
    kept = store.send("keep", "forever")
    store.complete("q", store.fetch("q"))
    store.cancel("q", cancelled)
    store.complete("keep", store.fetch("keep"))
    store.advance(30)
    assert store.maintain().deleted == 0
    store.advance(31)
    assert store.maintain().deleted == 2
    assert store.get_job("q", done) is None and store.get_job("q", cancelled) is None
    assert store.get_job("q", waiting) is not None
    store.advance(10**7)
    store.maintain()
    assert store.get_job("keep", kept).state is JobState.COMPLETED


def test_maintain_on_an_empty_store(store):
    assert store.maintain() == MaintenanceReport()
