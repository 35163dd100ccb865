"""``alkstore.Tasks``: declaring tasks, sending them typed and checked, the app worker, and the
drain helper, on the in-memory engine and on the run's PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore import InvalidOptions, JobState, QueueOptionsDiffer
from alkstore.tasks import Drained

DEADLINE = 30.0


def _eventually(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.fixture(params=["memory", "postgres"])
def dsn(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return f"memory://tasks-{uuid.uuid4().hex[:8]}"
    pg: str = request.getfixturevalue("pg_dsn")
    return pg


@pytest.fixture
def store(dsn: str, schema_name: str) -> Iterator[alkstore.Store]:
    with alkstore.connect(dsn, schema=schema_name) as opened:
        yield opened


def _registry() -> tuple[alkstore.Tasks, Any, Any]:
    tasks = alkstore.Tasks()

    @tasks.task(queue="add", retry_limit=0, priority=3)
    def add(a: int, b: int = 2) -> int:
        return a + b

    @tasks.task(queue="greet")
    async def greet(name: str, *, punctuation: str = "!") -> str:
        await asyncio.sleep(0)
        return f"hello {name}{punctuation}"

    return tasks, add, greet


# -- declaring --------------------------------------------------------------------------------


def test_a_task_is_still_the_plain_function_and_needs_no_connection() -> None:
    tasks, add, greet = _registry()
    assert add(1, 5) == 6
    assert asyncio.run(greet("ann")) == "hello ann!"
    assert [t.queue for t in tasks] == ["add", "greet"]
    assert (add.is_async, greet.is_async) == (False, True)


def test_the_queue_defaults_to_the_module_qualified_name() -> None:
    tasks = alkstore.Tasks()

    @tasks.task
    def plain() -> None: ...

    assert plain.queue == "test_tasks.test_the_queue_defaults_to_the_module_qualified_name.plain"


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"retries": 3}, "retries"),
        ({"retry_limit": -1}, "retry_limit"),
        ({"priority": "high"}, "priority"),
        ({"id": uuid.uuid4()}, "id"),
        ({"concurrency": 0}, "concurrency"),
        ({"queue": "no spaces"}, "queue"),
    ],
)
def test_a_bad_default_is_refused_when_the_task_is_declared(
    options: dict[str, Any], field: str
) -> None:
    tasks = alkstore.Tasks()
    with pytest.raises(InvalidOptions) as caught:
        tasks.task(**options)
    assert caught.value.field == field


def test_two_tasks_cannot_share_a_queue() -> None:
    tasks = alkstore.Tasks()
    tasks.task(queue="one")(lambda: None)
    with pytest.raises(InvalidOptions, match="already the queue"):
        tasks.task(queue="one")(lambda: None)


# -- sending ----------------------------------------------------------------------------------


def test_send_stores_the_arguments_by_name_with_the_defaults(store: alkstore.Store) -> None:
    _, add, _ = _registry()
    job_id = add.send(store, 1, b=5)
    assert job_id is not None
    job = store.get_job("add", job_id)
    assert job is not None and job.data == {"a": 1, "b": 5} and job.priority == 3
    queue = store.get_queue("add")
    assert queue is not None and queue.options.retry_limit == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        ((), {}, "a"),
        ((1,), {"c": 2}, "c"),
        ((1, 2, 3), {}, "args"),
        ((object(),), {}, "a"),
        ((1,), {"b": {1, 2}}, "b"),
    ],
)
def test_a_wrong_argument_is_named_and_nothing_is_written(
    store: alkstore.Store, args: tuple[Any, ...], kwargs: dict[str, Any], field: str
) -> None:
    _, add, _ = _registry()
    with pytest.raises(InvalidOptions) as caught:
        add.send(store, *args, **kwargs)
    assert caught.value.field == field
    assert store.get_queue("add") is None  # not even the queue


def test_a_non_json_argument_is_named_once_the_queue_exists(store: alkstore.Store) -> None:
    _, add, _ = _registry()
    add.send(store, 1)
    with pytest.raises(InvalidOptions) as caught:
        add.send(store, 1, b=object())
    assert caught.value.field == "b"
    assert len(store.list_jobs("add")) == 1


def test_the_queue_is_made_once_per_engine_not_per_send(
    store: alkstore.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, add, _ = _registry()
    add.send(store, 1)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("create_queue called again")

    monkeypatch.setattr(alkstore.Store, "create_queue", refuse)
    add.send(store, 2)
    assert len(store.list_jobs("add")) == 2


def test_a_queue_with_other_options_is_reported(store: alkstore.Store) -> None:
    _, add, _ = _registry()
    store.create_queue("add", retry_limit=5)
    with pytest.raises(QueueOptionsDiffer):
        add.send(store, 1)


def test_with_options_sends_with_other_options_checked_at_once(store: alkstore.Store) -> None:
    _, add, _ = _registry()
    chosen = uuid.uuid4()
    urgent = add.with_options(priority=9, id=chosen, singleton_key="k")
    assert urgent.send(store, 1) == chosen
    job = store.get_job("add", chosen)
    assert job is not None and (job.priority, job.singleton_key) == (9, "k")
    assert urgent(2) == 4 and add.send_options == {"priority": 3}
    with pytest.raises(InvalidOptions) as caught:
        add.with_options(priority="high")  # type: ignore[typeddict-item]
    assert caught.value.field == "priority"


def test_send_async_on_an_async_store(dsn: str, schema_name: str) -> None:
    _, add, greet = _registry()

    async def scenario() -> list[Any]:
        async with alkstore.connect_async(dsn, schema=schema_name) as astore:
            first = await add.send_async(astore, 1)
            second = await greet.send_async(astore, "bo", punctuation="?")
            assert first is not None and second is not None
            jobs = [await astore.get_job("add", first), await astore.get_job("greet", second)]
            return [job.data for job in jobs if job is not None]

    assert asyncio.run(scenario()) == [{"a": 1}, {"name": "bo", "punctuation": "?"}]


def test_a_store_of_the_other_face_is_refused(store: alkstore.Store) -> None:
    _, add, _ = _registry()
    with pytest.raises(InvalidOptions, match="send_async"):
        add.send(object(), 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions, match="is no AsyncStore"):
        asyncio.run(add.send_async(store, 1))  # type: ignore[arg-type]
    assert store.get_queue("add") is None


def test_send_joins_the_callers_transaction(pg_dsn: str, schema_name: str) -> None:
    _, add, _ = _registry()
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        add.send(store, 0)  # the queue exists: a rollback below cannot take it away
        with psycopg.connect(pg_dsn) as conn:
            kept = add.send(store.using(conn), 1)
            conn.rollback()
            sent = add.send(store.using(conn), 2)
            conn.commit()
        assert kept is not None and store.get_job("add", kept) is None
        assert sent is not None and store.get_job("add", sent) is not None


def test_a_queue_made_in_a_rolled_back_transaction_is_made_again(
    pg_dsn: str, schema_name: str
) -> None:
    _, add, _ = _registry()
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        with psycopg.connect(pg_dsn) as conn:
            add.send(store.using(conn), 1)
            conn.rollback()
            with pytest.raises(alkstore.QueueNotFound):
                add.send(store.using(conn), 2)
            conn.rollback()
            sent = add.send(store.using(conn), 3)
            conn.commit()
        assert sent is not None and store.get_job("add", sent) is not None


# -- the app worker ---------------------------------------------------------------------------


def _done(store: alkstore.Store, queue: str, job_id: uuid.UUID | None) -> bool:
    assert job_id is not None
    job = store.get_job(queue, job_id)
    return job is not None and job.state is JobState.COMPLETED


def test_one_worker_runs_sync_and_async_tasks(store: alkstore.Store) -> None:
    tasks, add, greet = _registry()
    first = add.send(store, 1, 2)
    second = greet.send(store, "cy")
    events: list[alkstore.worker.WorkerEvent] = []
    with tasks.worker(store, poll_interval=0.05, on_event=events.append) as worker:
        assert set(worker.workers) == {"add", "greet"}
        _eventually(lambda: _done(store, "add", first) and _done(store, "greet", second))
    assert [store.get_job("add", first).output, store.get_job("greet", second).output] == [  # type: ignore[union-attr]
        3,
        "hello cy!",
    ]


def test_a_task_that_raises_fails_its_job_with_the_stack(store: alkstore.Store) -> None:
    tasks = alkstore.Tasks()

    @tasks.task(queue="boom", retry_limit=0)
    async def boom() -> None:
        raise RuntimeError("no")

    job_id = boom.send(store)
    events: list[alkstore.worker.WorkerEvent] = []
    with tasks.worker(store, poll_interval=0.05, on_event=events.append):
        _eventually(lambda: store.get_job("boom", job_id).state is JobState.FAILED)  # type: ignore[union-attr]
    job = store.get_job("boom", job_id)  # type: ignore[arg-type]
    assert job is not None and job.output["name"] == "RuntimeError"
    assert "in boom" in job.output["stack"]
    assert [e.kind for e in events if e.kind == "handler_failed"] == ["handler_failed"]


def test_a_declared_concurrency_runs_that_many_calls_at_once(store: alkstore.Store) -> None:
    tasks = alkstore.Tasks()
    together = threading.Barrier(3, timeout=DEADLINE)

    @tasks.task(queue="wide", concurrency=3)
    def wide(n: int) -> int:
        together.wait()  # passes only when three calls run at once
        return n

    @tasks.task(queue="narrow")
    def narrow() -> None: ...

    ids = [wide.send(store, n) for n in range(3)]
    with tasks.worker(store, poll_interval=0.05) as worker:
        assert worker.workers["wide"].options.concurrency == 3
        assert worker.workers["narrow"].options.concurrency == 1
        _eventually(lambda: all(_done(store, "wide", i) for i in ids))


def test_queues_restricts_the_worker(store: alkstore.Store) -> None:
    tasks, add, _ = _registry()
    with tasks.worker(store, queues=["add"], poll_interval=0.05) as worker:
        assert set(worker.workers) == {"add"}
        job_id = add.send(store, 1)
        _eventually(lambda: _done(store, "add", job_id))
    with pytest.raises(InvalidOptions) as caught:
        tasks.worker(store, queues=["nope"])
    assert caught.value.field == "queues"
    with pytest.raises(InvalidOptions) as caught:
        tasks.worker(store, queues=[])
    assert caught.value.field == "queues"
    with pytest.raises(InvalidOptions) as caught:
        alkstore.Tasks().worker(store)
    assert caught.value.field == "tasks"


def test_worker_async_runs_both_kinds_on_an_async_store(dsn: str, schema_name: str) -> None:
    tasks, add, greet = _registry()

    async def scenario() -> list[Any]:
        async with alkstore.connect_async(dsn, schema=schema_name) as astore:
            first = await add.send_async(astore, 4)
            second = await greet.send_async(astore, "di")
            assert first is not None and second is not None
            async with await tasks.worker_async(astore, poll_interval=0.05):
                deadline = time.monotonic() + DEADLINE
                while True:
                    jobs = [
                        await astore.get_job("add", first),
                        await astore.get_job("greet", second),
                    ]
                    if all(j is not None and j.state is JobState.COMPLETED for j in jobs):
                        return [j.output for j in jobs if j is not None]
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.02)

    assert asyncio.run(scenario()) == [6, "hello di!"]


def test_stopping_ends_an_async_task_that_outlives_the_timeout(store: alkstore.Store) -> None:
    tasks = alkstore.Tasks()
    started = threading.Event()

    @tasks.task(queue="stuck")
    async def stuck() -> None:
        started.set()
        await asyncio.Event().wait()  # never set: only cancellation ends it

    job_id = stuck.send(store)
    worker = tasks.worker(store, poll_interval=0.05)
    assert started.wait(DEADLINE)
    worker.stop(timeout=0.1)
    job = store.get_job("stuck", job_id)  # type: ignore[arg-type]
    assert job is not None and job.state is JobState.RETRY
    # The thread that waited for the coroutine ended with it (none is left to hang the exit).
    _eventually(
        lambda: not [t for t in threading.enumerate() if t.name.startswith("alkstore-stuck")]
    )


def test_async_tasks_run_on_uvloop() -> None:
    tasks = alkstore.Tasks()

    @tasks.task(queue="loop")
    async def loop_kind() -> str:
        return type(asyncio.get_running_loop()).__module__

    with alkstore.connect("memory://") as store:
        job_id = loop_kind.send(store)
        assert tasks.drain(store) == Drained(completed=1)
        job = store.get_job("loop", job_id)  # type: ignore[arg-type]
        assert job is not None and job.output.startswith("uvloop")


# -- draining ---------------------------------------------------------------------------------


def test_drain_runs_every_due_job_and_those_they_send(store: alkstore.Store) -> None:
    tasks = alkstore.Tasks()
    seen: list[int] = []

    @tasks.task(queue="count", retry_limit=1)
    def count(n: int) -> int:
        seen.append(n)
        if n == 2:
            raise ValueError("two")
        if n < 3:
            step.send(store, n + 1)
        return n

    @tasks.task(queue="step")
    async def step(n: int) -> None:
        count.send(store, n)

    later = count.with_options(start_after=3600).send(store, 99)
    count.send(store, 0)
    drained = tasks.drain(store)
    # 0 sends step(1) -> count(1) sends step(2) -> count(2) fails, retries once, fails.
    assert seen == [0, 1, 2, 2]
    assert drained == Drained(completed=4, failed=2) and drained.ran == 6
    assert later is not None and store.get_job("count", later).state is JobState.CREATED  # type: ignore[union-attr]
    assert tasks.drain(store) == Drained()


def test_every_kind_of_parameter_goes_there_and_back(store: alkstore.Store) -> None:
    tasks = alkstore.Tasks()

    @tasks.task(queue="shapes")
    def shapes(first: int, /, second: str, *rest: int, flag: bool = False, **extra: str) -> Any:
        return [first, second, list(rest), flag, extra]

    job_id = shapes.send(store, 1, "two", 3, 4, flag=True, colour="red")
    job = store.get_job("shapes", job_id)  # type: ignore[arg-type]
    assert job is not None
    assert job.data == {
        "first": 1,
        "second": "two",
        "rest": [3, 4],
        "flag": True,
        "extra": {"colour": "red"},
    }
    assert tasks.drain(store) == Drained(completed=1)
    done = store.get_job("shapes", job_id)  # type: ignore[arg-type]
    assert done is not None and done.output == [1, "two", [3, 4], True, {"colour": "red"}]


def test_job_data_naming_no_parameter_fails_the_job(store: alkstore.Store) -> None:
    tasks, add, _ = _registry()
    add.send(store, 1)
    store.send("add", {"a": 1, "c": 2})  # e.g. sent before a parameter was renamed
    store.send("add", [1, 2])
    assert add.call_with({"a": 1}) == 3
    assert tasks.drain(store, queues=["add"]) == Drained(completed=1, failed=2)
    (failure, _) = [j.output for j in store.list_jobs("add", states=["failed"])]
    assert failure["name"] == "TypeError" and "no parameter ['c']" in failure["message"]


def test_drain_async_on_an_async_store(dsn: str, schema_name: str) -> None:
    tasks, add, greet = _registry()

    async def scenario() -> Drained:
        async with alkstore.connect_async(dsn, schema=schema_name) as astore:
            await add.send_async(astore, 1)
            await greet.send_async(astore, "ed")
            return await tasks.drain_async(astore)

    assert asyncio.run(scenario()) == Drained(completed=2)
