"""Maintenance: expiry, heartbeat timeouts, retention, deletion (spec §3, §8, §9)."""

from __future__ import annotations

from alkstore import JobState, MaintenanceReport


def test_expired_job_comes_back_and_finally_fails(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q", expire_seconds=60, retry_limit=1, dead_letter="dlq")
    job_id = alkstore_store.send("q", 1)
    alkstore_store.fetch("q")
    alkstore_store.advance(30)
    assert alkstore_store.maintain() == MaintenanceReport()
    alkstore_store.advance(31)
    assert alkstore_store.maintain().expired == 1
    job = alkstore_store.get_job("q", job_id)
    assert job.state is JobState.RETRY and job.output == {"message": "job timed out"}
    (again,) = alkstore_store.fetch("q")
    assert again.id == job_id and again.retry_count == 1
    alkstore_store.advance(61)
    assert alkstore_store.maintain().expired == 1
    assert alkstore_store.get_job("q", job_id).state is JobState.FAILED
    (dead,) = alkstore_store.fetch("dlq", include_metadata=True)
    assert dead.source_id == job_id and dead.output == {"message": "job timed out"}


def test_heartbeat_timeout(alkstore_store):
    alkstore_store.create_queue("q", heartbeat_seconds=20, retry_limit=0)
    alive = alkstore_store.send("q", "alive")
    silent = alkstore_store.send("q", "silent")
    alkstore_store.fetch("q", batch_size=2)
    alkstore_store.advance(15)
    assert alkstore_store.touch("q", alive) == 1
    alkstore_store.advance(10)
    report = alkstore_store.maintain()
    assert report.heartbeat_expired == 1 and report.expired == 0
    assert alkstore_store.get_job("q", alive).state is JobState.ACTIVE
    dead = alkstore_store.get_job("q", silent)
    assert dead.state is JobState.FAILED and dead.output == {"message": "heartbeat timed out"}


def test_jobs_without_heartbeat_only_expire(alkstore_store):
    alkstore_store.create_queue("q", expire_seconds=100)
    alkstore_store.send("q", 1)
    alkstore_store.fetch("q")
    alkstore_store.advance(50)
    assert alkstore_store.maintain().heartbeat_expired == 0


def test_retention_removes_old_queued_jobs_only(alkstore_store):
    alkstore_store.create_queue("q", retention_seconds=100)
    old = alkstore_store.send("q", "old")
    running = alkstore_store.send("q", "running", priority=1)
    alkstore_store.fetch("q")
    alkstore_store.advance(101)
    fresh = alkstore_store.send("q", "fresh")
    assert alkstore_store.maintain().retention_removed == 1
    assert alkstore_store.get_job("q", old) is None
    assert alkstore_store.get_job("q", running).state is JobState.ACTIVE
    assert alkstore_store.get_job("q", fresh) is not None


def test_retention_never_removes_a_job_waiting_for_its_retry(alkstore_store):
    alkstore_store.create_queue("q", retention_seconds=100, retry_delay=500)
    job_id = alkstore_store.send("q", 1)
    alkstore_store.advance(90)
    alkstore_store.fail("q", alkstore_store.fetch("q"))
    alkstore_store.advance(400)  # past the original keep_until, still before the retry is due
    assert alkstore_store.maintain().retention_removed == 0
    assert alkstore_store.get_job("q", job_id).state is JobState.RETRY
    alkstore_store.advance(101)
    assert [j.id for j in alkstore_store.fetch("q")] == [job_id]


def test_resume_moves_keep_until(alkstore_store):
    alkstore_store.create_queue("q", retention_seconds=100)
    job_id = alkstore_store.send("q", 1)
    alkstore_store.cancel("q", job_id)
    alkstore_store.advance(90)
    alkstore_store.resume("q", job_id)
    alkstore_store.advance(50)
    assert alkstore_store.maintain().retention_removed == 0
    assert alkstore_store.get_job("q", job_id).state is JobState.CREATED


def test_deletion_of_finished_jobs(alkstore_store):
    alkstore_store.create_queue("q", deletion_seconds=60)
    alkstore_store.create_queue("keep", deletion_seconds=0)
    done, cancelled, waiting = alkstore_store.send_many("q", [{"data": i} for i in range(3)])
    kept = alkstore_store.send("keep", "forever")
    alkstore_store.complete("q", alkstore_store.fetch("q"))
    alkstore_store.cancel("q", cancelled)
    alkstore_store.complete("keep", alkstore_store.fetch("keep"))
    alkstore_store.advance(30)
    assert alkstore_store.maintain().deleted == 0
    alkstore_store.advance(31)
    assert alkstore_store.maintain().deleted == 2
    assert (
        alkstore_store.get_job("q", done) is None and alkstore_store.get_job("q", cancelled) is None
    )
    assert alkstore_store.get_job("q", waiting) is not None
    alkstore_store.advance(10**7)
    alkstore_store.maintain()
    assert alkstore_store.get_job("keep", kept).state is JobState.COMPLETED


def test_maintain_on_an_empty_store(alkstore_store):
    assert alkstore_store.maintain() == MaintenanceReport()
