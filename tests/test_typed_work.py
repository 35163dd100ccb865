"""``work()`` and tasks are typed: mypy --strict rejects a misspelt work option, an async
handler on a sync store, a batch handler without ``batch=True`` (and the reverse), and a
task sent with a wrong argument name or type, where the call is written."""

from __future__ import annotations

import textwrap
import typing
from pathlib import Path

import attrs
import pytest

import alkstore
from alkstore.core.errors import InvalidOptions
from alkstore.tasks import TaskOptionsKwargs
from alkstore.worker import WorkOptions
from alkstore.worker.options import AppWorkKwargs, WorkKwargs
from typecheck import mypy_errors

SNIPPET = textwrap.dedent(
    """\
    import uuid
    from typing import Any

    import alkstore
    from alkstore import AsyncJobContext, Job, JobContext

    tasks = alkstore.Tasks()


    @tasks.task(retry_limit=1, priority=2)
    def charge(order_id: int, amount: float, *, note: str = "") -> dict[str, Any]:
        return {"order": order_id}


    @tasks.task
    async def bare(n: int) -> int:
        return n


    @tasks.task(retires=3)  # error
    def misspelt() -> None: ...


    def one(job: Job) -> dict[str, int]:
        return {"n": 1}


    def with_ctx(job: Job, ctx: JobContext) -> None: ...


    def many(jobs: list[Job]) -> dict[uuid.UUID, Any] | None: ...


    async def coro(job: Job) -> None: ...


    async def coro_ctx(job: Job, ctx: AsyncJobContext) -> str:
        return "x"


    def sync_calls(store: alkstore.Store) -> None:
        store.work("q", one, concurrency=2, poll_interval=0.5)
        store.work("q", with_ctx, transactional=True)
        store.work("q", many, batch=True, batch_size=10)
        store.work("q", lambda job: job.data)
        store.work("q", one, concurrancy=2)  # error
        store.work("q", coro)  # error
        store.work("q", many)  # error
        store.work("q", one, batch=True)  # error
        store.work("q", one, batch_size=10)  # error
        charge.send(store, 1, 2.5, note="n")
        charge.with_options(priority=5).send(store, order_id=1, amount=2)
        charge.send(store, 1, amount="2")  # error
        charge.send(store, 1, 2.0, note="n", notes="m")  # error
        charge.send(store, 1)  # error
        charge.with_options(priorty=5)  # error
        tasks.worker(store, concurrency=4, poll_interval=0.1)
        tasks.worker(store, transactional=True)  # error


    async def async_calls(store: alkstore.AsyncStore) -> None:
        await store.work("q", coro, concurrency=2)
        await store.work("q", coro_ctx)
        await store.work("q", one)
        await store.work("q", many, batch=True, batch_size=5)
        await store.work("q", coro, polling=1.0)  # error
        await store.work("q", many)  # error
        await charge.send_async(store, 1, 2.0)
        await charge.send_async(store, "1", 2.0)  # error
        job_id: uuid.UUID | None = charge.send(store, 1, 2.0)  # error
        await bare.send_async(store, 1)
        await bare.send_async(store, n="1")  # error
        result: int = await bare(2)
    """
)

EXPECTED = {n for n, line in enumerate(SNIPPET.splitlines(), 1) if line.endswith("# error")}
"""Lines of the snippet with a mistake, each of which mypy must report (and no other)."""


def test_mypy_reports_each_mistake_and_nothing_else(tmp_path: Path) -> None:
    errors = mypy_errors(tmp_path, SNIPPET)
    assert {line for line, _ in errors} == EXPECTED, errors


def test_the_typed_work_options_are_those_validated_at_run_time() -> None:
    typed = set(typing.get_type_hints(WorkKwargs)) | {"concurrency", "batch", "batch_size"}
    assert typed == {f.name for f in attrs.fields(WorkOptions)}
    # A task gets its arguments, not a context: what needs one is left out of tasks.worker.
    assert set(typing.get_type_hints(WorkKwargs)) - set(typing.get_type_hints(AppWorkKwargs)) == {
        "transactional"
    }


def test_the_typed_task_options_are_the_queue_and_send_options() -> None:
    both = {f.name for f in attrs.fields(alkstore.QueueOptions)} | {
        f.name for f in attrs.fields(alkstore.JobOptions)
    }
    assert set(typing.get_type_hints(TaskOptionsKwargs)) == both - {"id"}


def test_an_async_handler_on_a_sync_store_is_refused_at_run_time_too() -> None:
    async def handler(job: alkstore.Job) -> None: ...

    with alkstore.connect("memory://typed-work") as store:
        store.create_queue("q")
        with pytest.raises(InvalidOptions) as caught:
            store.work("q", handler)  # type: ignore[call-overload]
        assert caught.value.field == "handler"
