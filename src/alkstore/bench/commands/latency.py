"""``alkstore bench latency``: send -> consumer latency, alkstore's and its peers'."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import latency as latency_bench
from ..drain import Backend
from ..peers import LATENCY_PEERS
from ..report import (
    BenchProgress,
)
from ..server import Server
from .common import (
    Measured,
    Options,
    Row,
    Table,
    _arguments,
    _bar_chart,
    _each,
    _schema,
    run,
)


def latency(
    options: Options,
    *,
    engine: str,
    drivers: Sequence[str],
    rate: float,
    duration: float,
    poll_interval: float,
    batch: int,
    peers: Sequence[str] = LATENCY_PEERS,
) -> dict[str, Any]:
    """``bench latency``: send -> consumer latency of a polling consumer and of ``work()``,
    then of each of ``peers``' workers, in the same run."""
    arguments = _arguments(
        engine=engine,
        drivers=drivers,
        rate=rate,
        duration=duration,
        poll_interval=poll_interval,
        batch=batch,
        peers=peers,
    )
    unknown = [n for n in peers if n not in LATENCY_PEERS]
    if unknown:
        raise ValueError(f"unknown latency peers {unknown}: choose from {', '.join(LATENCY_PEERS)}")

    def measure(server: Server, progress: BenchProgress) -> Measured:
        def one(cell: tuple[str, str]) -> Row:
            driver, consumer = cell
            return latency_bench.latency_cell(
                server.dsn,
                Backend(engine, driver, options.emulate),
                rate=rate,
                duration=duration,
                poll_interval=poll_interval,
                batch=batch,
                schema=_schema("alkstore"),
                consumer=consumer,
            )

        consumers = latency_bench.CONSUMERS
        rows = _each(progress, "latency cells", [(d, c) for d in drivers for c in consumers], one)

        def peer(name: str) -> Row:
            return latency_bench.peer_latency_cell(
                name,
                server.dsn,
                rate=rate,
                duration=duration,
                concurrency=batch,
                schema=_schema("peer"),
            )

        rows += _each(progress, "peer latency cells", list(peers), peer)
        notes = [
            f"poll: a consumer fetches up to {batch} jobs and sleeps "
            f"{poll_interval * 1000:g} ms after any fetch that was not full (send start -> "
            "fetch returned). "
            f"work(): store.work(concurrency={batch}) woken by LISTEN/NOTIFY, sends from a "
            "second store (send start -> handler start; pg8000 cannot listen, so it polls). "
            f"Peers: their workers (concurrency {batch}) woken by NOTIFY, sends from a second "
            "connection (send start -> handler start). send call p50/p99: how long each send "
            "took (a durable commit waits for its WAL flush: the floor under every row). "
            "send returned->handler (work() and peers): from the send's return (its commit "
            "acknowledged) to the handler's start (negative when the handler started before "
            "the sender read its commit's answer)."
        ]
        table = Table(
            f"latency: {rate:g} jobs/s for {duration:g} s", latency_bench.COLUMNS, rows, notes
        )
        stage_rows = [r for r in rows if r.get("stamped") is not None]
        stage_notes = [
            "work() rows, ms: send = the send call; send start->listener = until the "
            "store's listener received the NOTIFY; listener->fetcher = until the woken fetch "
            "loop ran; claim = the claim statement; claimed->handler = until the handler "
            "started. Jobs stamped: those claimed by a woken fetch loop (the rest were "
            "claimed by a slot's complete_and_fetch)."
        ]
        stage_table = Table(
            "work() stage breakdown", latency_bench.STAGE_COLUMNS, stage_rows, stage_notes
        )
        chart = _bar_chart(
            "send -> fetch p50 / p99 ms",
            {
                f"{r['system']} {r['driver']} {r['consumer']} {q}": r[f"{q}_ms"] or 0.0
                for r in rows
                if r.get("available", True)
                for q in ("p50", "p99")
            },
        )
        tables = [table, stage_table] if stage_rows else [table]
        return Measured({"results": rows}, tables, chart)

    return run("latency", options, arguments, measure)
