"""``bench latency``: how long a job waits between ``send`` and the consumer getting it.

Two consumers per driver. ``poll``: a loop fetches up to ``batch`` jobs, completes them, and
sleeps ``poll_interval`` seconds whenever a fetch came back short of a full batch (the wait
ends when the fetch returned). ``work()``: a worker (``store.work``, concurrency ``batch``)
woken by LISTEN/NOTIFY, with sends from a second store so that the wake-up crosses the
server as it would between processes (the wait ends when the handler starts). A sender sends
one job every ``1 / rate`` seconds for ``duration`` seconds; each job carries the time its
``send`` began. Everything runs in this process, so the clocks agree. ``wait()``: the same worker
completes each job with an output, and the sending store waits for each result
(``store.wait``, docs/workers.md "Waiting for a result"), in up to :data:`WAITERS` threads or
tasks at once (the wait ends when ``wait`` returned the completed job).

The peers' workers are measured the same way in the same run (:func:`peer_latency_cell`):
pg-boss ``work()`` with ``useListenNotify`` on a ``notify`` queue (its clock in Node),
pgqueuer's ``QueueManager`` and procrastinate's worker with ``listen_notify``, each sending
from a second connection. Every row also reports how long the sends took: a durable send
waits for its commit's WAL flush, the floor under every system's latency on one disk. The
``work()`` rows and the peers' also report the wait from each send's return (its commit
acknowledged) to its handler's start, which leaves that flush out.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.records import Job
from ..worker import stages
from . import event_loop
from .drain import QUEUE, Backend, alkstore_row
from .measure import Latency, peak_rss_mb, reset_peak_rss
from .pacing import deadline_after, paced_async, paced_sync
from .peers import peer_module
from .report import BACKEND_COLUMNS, Column
from .server import drop_schema

POLL, WORK, WAIT = "poll", "work()", "wait()"
"""The consumers of a latency cell."""
CONSUMERS = (POLL, WORK, WAIT)
"""Every consumer, in the order a run measures them."""
WAITERS = 16
"""The ``wait()`` cell's waiting threads (or tasks at once): enough for every job in flight."""
WORK_POLL_INTERVAL = 1.0
"""The worker's polling backstop: wake-ups, not polls, deliver its jobs."""

PEER_DRIVERS = {"pg-boss": "node-postgres", "pgqueuer": "asyncpg", "procrastinate": "psycopg"}
"""The client library each latency peer runs on."""

COLUMNS = (
    Column("system", "system", justify="left"),
    *BACKEND_COLUMNS,
    Column("rate", "jobs/s sent"),
    Column("poll_interval_ms", "poll interval ms"),
    Column("batch", "batch"),
    Column("received", "jobs"),
    Column("p50_ms", "send start→handler p50 ms", 1),
    Column("p95_ms", "send start→handler p95 ms", 1),
    Column("p99_ms", "send start→handler p99 ms", 1),
    Column("max_ms", "send start→handler max ms", 1),
    Column("send_p50_ms", "send call p50 ms", 1),
    Column("send_p99_ms", "send call p99 ms", 1),
    Column("commit_p50_ms", "send returned→handler p50 ms", 1),
    Column("commit_p99_ms", "send returned→handler p99 ms", 1),
    Column("consumer", "consumer", justify="left"),
)

STAGES = (
    ("send", "send (its commit)"),
    ("notify", "send start→listener"),
    ("wake", "listener→fetcher"),
    ("claim", "claim"),
    ("dispatch", "claimed→handler"),
)
"""The stages of a ``work()`` wake-up (key, what it spans), in path order."""
STAGE_COLUMNS = (
    *BACKEND_COLUMNS,
    Column("stamped", "jobs stamped"),
    *(Column(f"{key}_{q}_ms", f"{label} {q}", 2) for key, label in STAGES for q in ("p50", "p99")),
)
"""The stage breakdown table of the ``work()`` rows."""


class _Receiver:
    """The consumer's side of a latency cell: the waits it saw, until it has them all."""

    def __init__(self, total: int, rate: float) -> None:
        self.total = total
        self.waits: list[float] = []
        """Seconds from each job's ``send`` until the fetch that returned it."""
        self.deadline = time.monotonic() + deadline_after(total, rate)
        """When the consumer gives up waiting for the last jobs."""

    @property
    def running(self) -> bool:
        """Jobs remain to be received, and the deadline has not passed."""
        return len(self.waits) < self.total and time.monotonic() < self.deadline

    def received(self, jobs: Sequence[Job]) -> None:
        """Record the waits of fetched ``jobs`` (now is when the fetch returned)."""
        now = time.perf_counter()
        self.waits.extend(now - float(job.data["sent"]) for job in jobs)


class _Handled(_Receiver):
    """A ``work()`` handler's receiver: the wait of each job and, from the stage probe, the
    stamps of its path, for :func:`_breakdown`."""

    def __init__(self, total: int, rate: float, probe: stages.Probe) -> None:
        super().__init__(total, rate)
        self.probe = probe
        self.paths: list[tuple[int, float, int, dict[str, int]]] = []
        """(job number, its send's start s, handler start ns, the probe's stamps) per job."""

    def started(self, job: Job) -> None:
        """The handler started on ``job`` now."""
        now = time.perf_counter_ns()
        began = float(job.data["sent"])
        self.waits.append(now / 1e9 - began)
        self.paths.append((int(job.data["n"]), began, now, self.probe.take(job.id)))


class _Numbered:
    """A ``send`` callback for the paced senders whose jobs carry their number too."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, began: float) -> dict[str, Any]:
        self.count += 1
        return {"sent": began, "n": self.count - 1}


def _ms(samples: Sequence[float]) -> dict[str, float | None]:
    found = Latency.of(list(samples))
    return {"p50": found.p50_ms, "p99": found.p99_ms}


def _breakdown(handled: _Handled, sends: Sequence[float]) -> dict[str, Any]:
    """Commit -> handler start, and the stage breakdown (milliseconds) of ``work()``: each
    span from the stamps along the path (jobs a slot claimed with ``complete_and_fetch``
    carry no claim stamps, and a job whose fetcher was not woken by its notification has no
    listener stamp: both are left out of the stages they lack)."""
    spans: dict[str, list[float]] = {key: [] for key, _ in STAGES}
    commits: list[float] = []
    stamped = 0
    for n, began, started, stamps in handled.paths:
        if n >= len(sends):
            continue
        commits.append(started / 1e9 - (began + sends[n]))
        spans["send"].append(sends[n])
        if not stamps:
            continue
        stamped += 1
        notified = stamps.get(stages.NOTIFIED)
        if notified is not None:
            spans["notify"].append(notified / 1e9 - began)
            spans["wake"].append((stamps[stages.WOKEN] - notified) / 1e9)
        spans["claim"].append((stamps[stages.CLAIMED] - stamps[stages.CLAIMING]) / 1e9)
        spans["dispatch"].append((started - stamps[stages.CLAIMED]) / 1e9)
    commit = _ms(commits)
    row: dict[str, Any] = {"commit_p50_ms": commit["p50"], "commit_p99_ms": commit["p99"]}
    row["stamped"] = stamped
    for key, samples in spans.items():
        row |= {f"{key}_{q}_ms": v for q, v in _ms(samples).items()}
    return row


def _sent(began: float) -> dict[str, Any]:
    """The data of a job: when its ``send`` began."""
    return {"sent": began}


def _timings(waits: Sequence[float], sends: Sequence[float]) -> dict[str, Any]:
    latency, send = Latency.of(list(waits)), Latency.of(list(sends))
    return {
        "received": len(waits),
        "p50_ms": latency.p50_ms,
        "p95_ms": latency.p95_ms,
        "p99_ms": latency.p99_ms,
        "max_ms": max(waits) * 1000 if waits else None,
        "send_p50_ms": send.p50_ms,
        "send_p99_ms": send.p99_ms,
    }


def latency_cell(
    dsn: str,
    backend: Backend,
    *,
    rate: float,
    duration: float,
    poll_interval: float,
    batch: int,
    schema: str,
    consumer: str = POLL,
) -> dict[str, Any]:
    """Send at ``rate`` jobs/s for ``duration`` s to ``consumer``; one JSON row."""
    total = max(1, round(rate * duration))
    stamped: dict[str, Any] = {}
    try:
        args = (dsn, backend, rate, total, poll_interval, batch, schema)
        if consumer == WORK:
            probe = stages.enable()
            try:
                handled, sends = (
                    event_loop.run(_work_async(*args, probe))
                    if backend.is_async
                    else _work_sync(*args, probe)
                )
            finally:
                stages.disable()
            waits, stamped = handled.waits, _breakdown(handled, sends)
        elif consumer == WAIT:
            waits, sends = (
                event_loop.run(_wait_async(*args)) if backend.is_async else _wait_sync(*args)
            )
        elif backend.is_async:
            waits, sends = event_loop.run(_latency_async(*args))
        else:
            waits, sends = _run_sync(*args)
    finally:
        drop_schema(dsn, schema)
    return alkstore_row(
        backend,
        {
            "rate": rate,
            "duration_s": duration,
            "poll_interval_ms": round(
                (poll_interval if consumer == POLL else WORK_POLL_INTERVAL) * 1000
            ),
            "batch": batch,
            "sent": total,
            **_timings(waits, sends),
            **stamped,
            "consumer": consumer,
        },
    )


def peer_latency_cell(
    name: str, dsn: str, *, rate: float, duration: float, concurrency: int, schema: str
) -> dict[str, Any]:
    """:func:`latency_cell` for peer ``name``'s worker (one of ``LATENCY_PEERS``)."""
    total = max(1, round(rate * duration))
    module = peer_module(name)
    row: dict[str, Any] = {"system": name, "engine": "postgres", "driver": PEER_DRIVERS[name]}
    row |= {"rate": rate, "sent": total, "poll_interval_ms": None}
    row |= {"duration_s": duration, "batch": concurrency, "consumer": "worker (notify)"}
    reason = module.unavailable()
    if reason is not None:
        return {**row, "available": False, "reason": reason}
    reset_peak_rss()
    try:
        found = module.latency(dsn, rate, total, concurrency, schema)
    except Exception as exc:
        return {**row, "available": False, "reason": f"failed: {type(exc).__name__}: {exc}"}
    commit = _ms(found["commits"])
    return {
        **row,
        "available": True,
        **_timings(found["waits"], found["sends"]),
        "commit_p50_ms": commit["p50"],
        "commit_p99_ms": commit["p99"],
        "peak_rss_mb": None if name == "pg-boss" else peak_rss_mb(),
    }


Timings = tuple[list[float], list[float]]
"""The waits (send -> consumer) and the seconds each send took."""


def _run_sync(
    dsn: str, backend: Backend, rate: float, total: int, interval: float, batch: int, schema: str
) -> Timings:
    with backend.open_sync(dsn, schema, pool_size=2) as store:
        store.create_queue(QUEUE)
        receiver = _Receiver(total, rate)
        reset_peak_rss()

        def consume() -> None:
            while receiver.running:
                jobs = store.fetch(QUEUE, batch_size=batch)
                receiver.received(jobs)
                if jobs:
                    store.complete(QUEUE, jobs)
                if len(jobs) < batch:
                    time.sleep(interval)

        consumer = threading.Thread(target=consume, name="bench-latency-consumer", daemon=True)
        consumer.start()
        sends = paced_sync(total, rate, lambda began: store.send(QUEUE, _sent(began)))
        consumer.join()
    return receiver.waits, sends


async def _latency_async(
    dsn: str, backend: Backend, rate: float, total: int, interval: float, batch: int, schema: str
) -> Timings:
    store = await backend.open_async(dsn, schema, pool_size=2)
    async with store:
        await store.create_queue(QUEUE)
        receiver = _Receiver(total, rate)
        reset_peak_rss()

        async def consume() -> None:
            while receiver.running:
                jobs = await store.fetch(QUEUE, batch_size=batch)
                receiver.received(jobs)
                if jobs:
                    await store.complete(QUEUE, jobs)
                if len(jobs) < batch:
                    await asyncio.sleep(interval)

        consumer = asyncio.ensure_future(consume())
        sends = await paced_async(total, rate, lambda began: store.send(QUEUE, _sent(began)))
        await consumer
    return receiver.waits, sends


def _work_sync(
    dsn: str,
    backend: Backend,
    rate: float,
    total: int,
    _interval: float,
    batch: int,
    schema: str,
    probe: stages.Probe,
) -> tuple[_Handled, list[float]]:
    with (
        backend.open_sync(dsn, schema, pool_size=batch + 4) as store,
        backend.open_sync(dsn, schema, pool_size=1) as sender,
    ):
        store.create_queue(QUEUE)
        handled = _Handled(total, rate, probe)
        done = threading.Event()
        data = _Numbered()
        reset_peak_rss()

        def handler(job: Job) -> None:
            handled.started(job)
            if not handled.running:
                done.set()

        with store.work(
            QUEUE, handler, concurrency=batch, poll_interval=WORK_POLL_INTERVAL, maintenance=False
        ):
            sends = paced_sync(total, rate, lambda began: sender.send(QUEUE, data(began)))
            done.wait(max(0.0, handled.deadline - time.monotonic()))
    return handled, sends


async def _work_async(
    dsn: str,
    backend: Backend,
    rate: float,
    total: int,
    _interval: float,
    batch: int,
    schema: str,
    probe: stages.Probe,
) -> tuple[_Handled, list[float]]:
    store = await backend.open_async(dsn, schema, pool_size=batch + 4)
    sender = await backend.open_async(dsn, schema, pool_size=1)
    async with store, sender:
        await store.create_queue(QUEUE)
        handled = _Handled(total, rate, probe)
        done = asyncio.Event()
        data = _Numbered()
        reset_peak_rss()

        async def handler(job: Job) -> None:
            handled.started(job)
            if not handled.running:
                done.set()

        async with await store.work(
            QUEUE, handler, concurrency=batch, poll_interval=WORK_POLL_INTERVAL, maintenance=False
        ):
            sends = await paced_async(total, rate, lambda b: sender.send(QUEUE, data(b)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), handled.deadline - time.monotonic())
    return handled, sends


def _result(job: Job) -> dict[str, Any]:
    """The ``wait()`` cell's handler: an output, as a real result would have."""
    return {"done": job.data["sent"]}


def _wait_sync(
    dsn: str, backend: Backend, rate: float, total: int, _interval: float, batch: int, schema: str
) -> Timings:
    with (
        backend.open_sync(dsn, schema, pool_size=batch + 4) as store,
        backend.open_sync(dsn, schema, pool_size=WAITERS + 1) as sender,
    ):
        store.create_queue(QUEUE)
        waits: list[float] = []
        timeout = deadline_after(total, rate)
        reset_peak_rss()

        def waited(began: float, job_id: Any) -> None:
            sender.wait(QUEUE, job_id, timeout=timeout)
            waits.append(time.perf_counter() - began)  # list.append is atomic

        with (
            ThreadPoolExecutor(WAITERS, thread_name_prefix="bench-wait") as pool,
            store.work(
                QUEUE,
                _result,
                concurrency=batch,
                poll_interval=WORK_POLL_INTERVAL,
                maintenance=False,
            ),
        ):
            sends = paced_sync(
                total,
                rate,
                lambda began: pool.submit(waited, began, sender.send(QUEUE, _sent(began))),
            )
            pool.shutdown(wait=True)
    return waits, sends


async def _wait_async(
    dsn: str, backend: Backend, rate: float, total: int, _interval: float, batch: int, schema: str
) -> Timings:
    store = await backend.open_async(dsn, schema, pool_size=batch + 4)
    sender = await backend.open_async(dsn, schema, pool_size=WAITERS + 1)
    async with store, sender:
        await store.create_queue(QUEUE)
        waits: list[float] = []
        timeout = deadline_after(total, rate)
        slots = asyncio.Semaphore(WAITERS)
        pending: set[asyncio.Task[None]] = set()
        reset_peak_rss()

        async def waited(began: float, job_id: Any) -> None:
            async with slots:
                await sender.wait(QUEUE, job_id, timeout=timeout)
            waits.append(time.perf_counter() - began)

        async def send(began: float) -> None:
            job_id = await sender.send(QUEUE, _sent(began))
            pending.add(asyncio.ensure_future(waited(began, job_id)))

        async with await store.work(
            QUEUE,
            _async_result,
            concurrency=batch,
            poll_interval=WORK_POLL_INTERVAL,
            maintenance=False,
        ):
            sends = await paced_async(total, rate, send)
            await asyncio.gather(*pending)
    return waits, sends


async def _async_result(job: Job) -> dict[str, Any]:
    return _result(job)


__all__ = [
    "COLUMNS",
    "CONSUMERS",
    "POLL",
    "STAGE_COLUMNS",
    "WAIT",
    "WORK",
    "latency_cell",
    "peer_latency_cell",
]
