"""Smoke runs of ``alkstore bench`` on tiny sizes, so the harness keeps working.

Performance is never asserted: only that every command runs, writes the cells it should,
delivers no job twice and finishes every job. The server is a throwaway cluster built for
speed (not durable), which the harness labels as such.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore.bench.commands.drain import telemetry_overhead
from alkstore.bench.commands.peers import _enqueue_ratios
from alkstore.bench.measure import Latency, cpu_window, local_postmaster, percentile
from alkstore.bench.pacing import after_commit
from alkstore.bench.pressure import PressureSpec, Trace, held, phases
from alkstore.bench.server import drop_schema
from alkstore.bench.telemetry_bench import instrument_for_bench
from alkstore.cli import main
from alkstore.conformance.cluster import TempCluster
from alkstore.conformance.pgbouncer import PgBouncerUnavailable, find_pgbouncer
from alkstore.worker import stages


@pytest.fixture(scope="module")
def _bench_dsn() -> Iterator[str]:
    with TempCluster(max_connections=100) as cluster:
        yield cluster.dsn


def bench(dsn: str, tmp_path: Path, command: str) -> dict[str, Any]:
    """Run ``alkstore bench <command>`` against ``dsn``; the JSON document it wrote."""
    args = command.split()
    path = tmp_path / f"{args[0]}.json"
    status = main(["bench", *args, "--dsn", dsn, "--json", str(path), "--no-progress"])
    assert status == 0
    document: dict[str, Any] = json.loads(path.read_text())
    assert document["command"] == args[0]
    assert document["durability"].startswith("NOT DURABLE")  # the test cluster is not
    env = document["environment"]
    assert env["postgresql"]["fsync"] == "off"
    assert env["machine"]["cpu_count"] >= 1
    assert env["libraries"]["psycopg"]
    uvloop = f"uvloop {env['libraries']['uvloop']}"  # the default
    assert env["event_loop"] == ("asyncio" if "--event-loop asyncio" in command else uvloop)
    return document


def check_drained(row: dict[str, Any], jobs: int) -> None:
    """One drain cell: measured, no duplicate, every job completed."""
    assert row["available"], row
    assert row["duplicates"] == 0
    assert row["completed"] == jobs
    assert row["delivered"] == jobs
    assert row["jobs_per_s"] > 0
    assert not row["timed_out"]


def cells(rows: list[dict[str, Any]], **where: Any) -> set[tuple[int, int]]:
    """The (consumers, batch) cells of the rows matching ``where``."""
    return {
        (r["consumers"], r["batch"])
        for r in rows
        if all(r.get(key) == value for key, value in where.items())
    }


def test_percentiles_by_nearest_rank() -> None:
    samples = [float(n) for n in range(1, 101)]
    assert percentile(samples, 50) == 50.0
    assert percentile(samples, 99) == 99.0
    assert percentile([], 50) is None
    assert Latency.of([0.001, 0.002]).p50_ms == pytest.approx(1.0)


def test_drain(_bench_dsn: str, tmp_path: Path) -> None:
    plot = tmp_path / "drain.png"
    doc = bench(
        _bench_dsn,
        tmp_path,
        f"drain --jobs 200 --consumers 1,2 --batch 1,10 --driver psycopg,asyncpg --plot {plot}",
    )
    rows = doc["results"]
    for driver in ("psycopg", "asyncpg"):
        assert cells(rows, driver=driver) == {(1, 1), (2, 1), (1, 10), (2, 10)}
    for row in rows:
        check_drained(row, 200)
        assert row["fetch_p50_ms"] > 0
        assert row["peak_rss_mb"] > 0
        assert row["client_cpu_us_per_job"] > 0
        assert row["server_cpu_us_per_job"] is not None  # the test's server runs here
    assert plot.stat().st_size > 0


def test_drain_through_work(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(
        _bench_dsn,
        tmp_path,
        "drain --jobs 200 --consumers 1,2 --batch 1,10 --driver psycopg+work,asyncpg+work "
        "--event-loop asyncio",
    )
    rows = doc["results"]
    for driver in ("psycopg+work", "asyncpg+work"):
        assert cells(rows, driver=driver) == {(1, 1), (2, 1), (1, 10), (2, 10)}
    for row in rows:
        check_drained(row, 200)


def test_contention(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(_bench_dsn, tmp_path, "contention --jobs 100 --consumers 2 --batch 1,10")
    rows = doc["results"]
    assert cells(rows, engine="postgres") == {(2, 1), (2, 10)}
    lockfree = [r for r in rows if r["engine"] != "postgres"]
    assert len(lockfree) == 2
    if importlib.util.find_spec("alkstore.engines.emulation") is None:
        assert all(not r["available"] for r in lockfree)  # reported, not a crash
    else:
        assert {r["engine"] for r in lockfree} == {"cockroachdb (emulated)"}
        for row in lockfree:
            check_drained(row, 100)
    for row in rows:
        if row["engine"] == "postgres":
            check_drained(row, 100)
    assert len(doc["side_by_side"]) == 2


def test_enqueue(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(
        _bench_dsn,
        tmp_path,
        "enqueue --jobs 300 --send-jobs 20 --senders 1,2 --batch-size 100",
    )
    rows = doc["results"]
    assert {(r["mode"], r["senders"]) for r in rows} == {
        ("send", 1),
        ("send", 2),
        ("send_many", 1),
        ("send_many", 2),
    }
    for row in rows:
        assert row["jobs_per_s"] > 0
        assert row["jobs"] == (20 if row["mode"] == "send" else 300)


def test_latency(_bench_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALKSTORE_PGBOSS_DIR", str(tmp_path / "no-such-dir"))
    doc = bench(
        _bench_dsn,
        tmp_path,
        "latency --rate 40 --duration 0.5 --poll-interval 0.01 --peers pg-boss",
    )
    polled, worked, waited, peer = doc["results"]
    assert (polled["consumer"], worked["consumer"]) == ("poll", "work()")
    assert waited["consumer"] == "wait()"  # send start -> the result in the waiter's hands
    for row in (polled, worked, waited):
        assert row["received"] == row["sent"] == 20
        assert row["p50_ms"] > 0
        assert row["send_p50_ms"] > 0
    assert polled["poll_interval_ms"] == 10
    # work(): commit -> handler and the stage breakdown, from the stamps of the jobs a woken
    # fetch loop claimed (the stage probe is off again once the cell is measured).
    assert worked["commit_p50_ms"] is not None and "commit_p50_ms" not in polled
    assert 1 <= worked["stamped"] <= 20
    for stage in ("send", "claim", "dispatch"):
        assert worked[f"{stage}_p50_ms"] >= 0
    assert worked["claim_p99_ms"] >= worked["claim_p50_ms"]
    assert stages.PROBE is None
    assert (peer["system"], peer["available"]) == ("pg-boss", False)
    assert "no-such-dir" in peer["reason"]


def test_after_commit_pairs_each_handled_job_with_its_own_send() -> None:
    # Sends began at 1.0 and 2.0 and took 0.5 and 0.25 s; the second job's handler started
    # before its sender read the commit's answer, a job of an unknown send is left out.
    handled = [(2.0, 2.2), (1.0, 1.75), (9.0, 9.5)]
    assert after_commit(handled, [1.0, 2.0], [0.5, 0.25]) == pytest.approx([-0.05, 0.25])


def test_rss(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(_bench_dsn, tmp_path, "rss --jobs 500 --concurrency 2 --batch 10 --every 0.05")
    (row,) = doc["results"]
    assert row["handled"] == 500
    samples = row["rss_samples"]
    assert row["samples"] == len(samples) >= 2
    assert samples[0]["handled"] == 0 and samples[-1]["handled"] == 500
    assert all(s["rss_mb"] > 0 for s in samples)
    assert row["rss_max_mb"] == max(s["rss_mb"] for s in samples)


def test_scale(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(
        _bench_dsn,
        tmp_path,
        "scale --depths 100,500 --finished 500 --burst 500 --samples 20 --drain-jobs 50 "
        "--consumers 2 --batch 5",
    )
    rows = doc["results"]
    assert [(r["queued"], r["finished"]) for r in rows] == [
        (100, 0),
        (500, 0),
        (100, 500),
        (500, 0),
    ]
    assert rows[-1]["scenario"] == "500 queued, never analyzed"
    for row in rows:
        assert row["fetch_samples"] == 20
        assert row["fetch_p50_ms"] > 0
        assert row["drain_jobs"] >= 50
        assert row["drain_jobs_per_s"] > 0
        assert row["duplicates"] == 0


def test_scale_without_the_extra_scenarios(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(
        _bench_dsn,
        tmp_path,
        "scale --depths 100 --finished 0 --burst 0 --samples 5 --drain-jobs 20 --consumers 1",
    )
    assert [r["scenario"] for r in doc["results"]] == ["100 queued"]


def test_wal(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(_bench_dsn, tmp_path, "wal --jobs 300 --batch 1,50")
    rows = doc["results"]
    assert [(r["system"], r["batch"]) for r in rows] == [
        ("alkstore", 1),
        ("raw-sql", 1),
        ("alkstore", 50),
        ("raw-sql", 50),
    ]
    for row in rows:
        assert row["send_bytes_per_job"] > 0 and row["drain_bytes_per_job"] > 0
        assert row["send_records_per_job"] >= 1  # the job's row at least
        assert row["drain_records_per_job"] >= 2  # at least a claim and a completion
    assert [r["ratio"] for r in rows if r["system"] == "raw-sql"] == [1.0, 1.0]


def test_peers_raw_sql_and_an_unavailable_peer(
    _bench_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALKSTORE_PGBOSS_DIR", str(tmp_path / "no-such-dir"))
    doc = bench(
        _bench_dsn,
        tmp_path,
        "peers --jobs 200 --consumers 1,2 --batch 1,10 --peers raw-sql,pg-boss",
    )
    rows = doc["results"]
    expected = {(1, 1), (2, 1), (1, 10), (2, 10)}
    assert cells(rows, system="alkstore") == expected
    assert cells(rows, system="raw-sql") == expected
    for row in rows:
        if row["system"] == "pg-boss":
            assert not row["available"]
            assert "no-such-dir" in row["reason"]
        else:
            check_drained(row, 200)
    for ratio in doc["ratios"]:
        assert ratio["raw-sql ratio"] > 0
        assert ratio["pg-boss"].startswith("not available")
    assert {r["system"] for r in doc["enqueue"]} == {"alkstore", "raw-sql", "pg-boss"}
    ours = doc["enqueue"][0]
    assert ours["driver"] == "psycopg" and ours["enqueue_jobs_per_s"] > 0


def test_peers_raw_sql_lanes_drains_every_job_once(_bench_dsn: str, tmp_path: Path) -> None:
    # 3 consumers, 3 lanes: each empties its own lane, then helps with the others' rest.
    doc = bench(
        _bench_dsn, tmp_path, "peers --jobs 500 --consumers 3 --batch 7 --peers raw-sql-lanes"
    )
    rows = [r for r in doc["results"] if r["system"] == "raw-sql-lanes"]
    assert cells(rows) == {(3, 7)}
    check_drained(rows[0], 500)


def test_peers_gated_variants_drain_every_job_once(_bench_dsn: str, tmp_path: Path) -> None:
    gated = ("raw-sql-gated", "raw-sql-gated-early", "raw-sql-gated-k4")
    doc = bench(
        _bench_dsn, tmp_path, f"peers --jobs 300 --consumers 6 --batch 5 --peers {','.join(gated)}"
    )
    for name in gated:
        rows = [r for r in doc["results"] if r["system"] == name]
        assert cells(rows) == {(6, 5)}
        check_drained(rows[0], 300)


def test_peers_layout_variants_drain_every_job_once(_bench_dsn: str, tmp_path: Path) -> None:
    # raw-sql-job-table makes alkstore's job table with its migrations: a migration that
    # no longer runs on its own, or a NOT NULL column the insert misses, fails here.
    layouts = ("raw-sql-keyed", "raw-sql-ordered", "raw-sql-job-table")
    doc = bench(
        _bench_dsn,
        tmp_path,
        f"peers --jobs 400 --consumers 4 --batch 9 --peers {','.join(layouts)}",
    )
    for name in layouts:
        rows = [r for r in doc["results"] if r["system"] == name]
        assert cells(rows) == {(4, 9)}
        check_drained(rows[0], 400)


def test_a_cell_drains_ten_claims_a_consumer_at_least(_bench_dsn: str, tmp_path: Path) -> None:
    # 4 consumers x 20 a fetch x 10 rounds = 800 jobs, more than --jobs, for every system.
    doc = bench(_bench_dsn, tmp_path, "peers --jobs 100 --consumers 1,4 --batch 20 --peers raw-sql")
    drained = {(r["system"], r["consumers"]): r["completed"] for r in doc["results"]}
    assert drained == {
        ("alkstore", 1): 200,
        ("raw-sql", 1): 200,
        ("alkstore", 4): 800,
        ("raw-sql", 4): 800,
    }


def test_drain_with_the_claim_gate_is_labelled(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(
        _bench_dsn, tmp_path, "drain --engine postgres+gate --jobs 100 --consumers 2 --batch 5"
    )
    [row] = doc["results"]
    assert row["engine"] == "postgres+gate"
    check_drained(row, 100)


def test_peers_steady_and_burst_variants_are_labelled(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(
        _bench_dsn,
        tmp_path,
        "peers --jobs 100 --consumers 2 --batch 5 --peers raw-sql --variant steady,burst",
    )
    rows = doc["results"]
    assert doc["arguments"]["variants"] == ["steady", "burst"]
    assert {(r["system"], r["variant"]) for r in rows} == {
        (system, variant) for system in ("alkstore", "raw-sql") for variant in ("steady", "burst")
    }
    for row in rows:
        check_drained(row, 100)
    assert [(r["variant"], r["batch"]) for r in doc["ratios"]] == [("steady", 5), ("burst", 5)]
    assert all(r["raw-sql ratio"] > 0 for r in doc["ratios"])


def test_peers_refuse_an_unknown_variant(_bench_dsn: str, tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        bench(_bench_dsn, tmp_path, "peers --jobs 10 --peers raw-sql --variant cold")


def test_drain_emulates_only_when_asked(_bench_dsn: str, tmp_path: Path) -> None:
    shape = "--jobs 50 --consumers 1 --batch 5 --driver psycopg"
    asked = bench(_bench_dsn, tmp_path, f"drain --engine yugabytedb --emulate {shape}")
    [row] = asked["results"]
    assert row["engine"] == "yugabytedb (emulated)"
    check_drained(row, 50)
    # Without --emulate the engine's SQL goes to the server as is, whatever its name: a DSN
    # may reach a real YugabyteDB, and the table must not claim an emulation that did not run.
    plain = bench(_bench_dsn, tmp_path, f"drain --engine yugabytedb {shape}")
    [row] = plain["results"]
    assert row["engine"] == "yugabytedb"
    check_drained(row, 50)


def test_drain_with_telemetry_runs_each_cell_with_and_without(
    _bench_dsn: str, tmp_path: Path
) -> None:
    doc = bench(
        _bench_dsn,
        tmp_path,
        "drain --jobs 100 --consumers 2 --batch 5 --driver psycopg,asyncpg+work --telemetry",
    )
    assert doc["arguments"]["telemetry"] is True
    rows = doc["results"]
    for driver in ("psycopg", "asyncpg+work"):
        assert sorted(r["engine"] for r in rows if r["driver"] == driver) == [
            "postgres",
            "postgres [otel]",
        ]
    for row in rows:
        check_drained(row, 100)
    summary = {r["driver"]: r for r in doc["telemetry_overhead"]}
    assert set(summary) == {"psycopg", "asyncpg+work"}
    for driver, row in summary.items():
        assert row["engine"] == "postgres"
        assert row["rounds"] == 1
        pair = {r["engine"]: r for r in rows if r["driver"] == driver}
        assert row["off_jobs_per_s"] == pair["postgres"]["jobs_per_s"]
        assert row["on_jobs_per_s"] == pair["postgres [otel]"]["jobs_per_s"]
        assert row["ratio"] == pytest.approx(row["on_jobs_per_s"] / row["off_jobs_per_s"], abs=1e-3)
        assert row["cpu_ratio"] > 0
        # one round: its own ratio is the paired figure
        assert row["paired_ratio"] == pytest.approx(row["ratio"])
        on, off = pair["postgres [otel]"], pair["postgres"]
        assert row["paired_cpu_ratio"] == pytest.approx(
            (on["client_cpu_us_per_job"] + on["server_cpu_us_per_job"])
            / (off["client_cpu_us_per_job"] + off["server_cpu_us_per_job"])
        )


def test_telemetry_overhead_pairs_each_round_with_itself() -> None:
    # Two rounds measure telemetry at 0.9 of the drain without it; in the third the machine
    # hiccups during the uninstrumented drain. The ratio of the medians then says telemetry
    # made the drain faster; each round against itself says 0.9.
    def drained(otel: bool, rate: float, cpu: float) -> dict[str, Any]:
        return {
            "engine": "postgres [otel]" if otel else "postgres",
            "driver": "psycopg",
            "consumers": 8,
            "batch": 100,
            "jobs_per_s": rate,
            "client_cpu_us_per_job": cpu,
            "server_cpu_us_per_job": None,
        }

    rows = [
        drained(False, 40_000, 10.0),
        drained(True, 36_000, 11.0),
        drained(True, 27_000, 16.5),
        drained(False, 30_000, 15.0),
        drained(False, 20_000, 20.0),
        drained(True, 33_000, 12.0),
    ]
    [row] = telemetry_overhead(rows)
    assert row["rounds"] == 3
    assert row["ratio"] == pytest.approx(33_000 / 30_000)
    assert row["paired_ratio"] == pytest.approx(0.9)
    assert row["paired_cpu_ratio"] == pytest.approx(1.1)


def test_drain_with_sampled_telemetry_records_the_share(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(
        _bench_dsn,
        tmp_path,
        "drain --jobs 100 --consumers 2 --batch 5 --telemetry --telemetry-sample 0.25",
    )
    assert doc["arguments"]["telemetry_sample"] == 0.25
    assert sorted(r["engine"] for r in doc["results"]) == ["postgres", "postgres [otel]"]
    for row in doc["results"]:
        check_drained(row, 100)


@pytest.mark.parametrize("share", ["0", "1.5", "-0.1"])
def test_a_telemetry_sample_outside_0_to_1_is_refused(
    _bench_dsn: str, tmp_path: Path, share: str
) -> None:
    path = tmp_path / "drain.json"
    shape = ["--jobs", "10", "--consumers", "1", "--batch", "1", "--telemetry"]
    where = ["--dsn", _bench_dsn, "--json", str(path), "--no-progress"]
    status = main(["bench", "drain", *shape, "--telemetry-sample", share, *where])
    assert status != 0
    assert not path.exists()


def test_a_telemetry_sample_without_telemetry_is_refused(_bench_dsn: str, tmp_path: Path) -> None:
    path = tmp_path / "drain.json"
    where = ["--dsn", _bench_dsn, "--json", str(path), "--no-progress"]
    status = main(["bench", "drain", "--jobs", "10", "--telemetry-sample", "0.5", *where])
    assert status != 0
    assert not path.exists()


@pytest.mark.parametrize(("share", "recorded"), [(1.0, 12), (1e-9, 0)])
def test_bench_telemetry_records_the_spans_of_the_sampled_share(
    _bench_dsn: str, share: float, recorded: int
) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    schema = f"sampled_{'all' if share == 1.0 else 'few'}"
    with alkstore.connect(_bench_dsn, schema=schema) as store:
        provider = instrument_for_bench(store, share)
        spans = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        store.create_queue("q")
        for n in range(12):  # twelve root spans: twelve traces
            store.send("q", {"n": n})
        assert len(spans.get_finished_spans()) == recorded
    drop_schema(_bench_dsn, schema)


def test_cpu_accounting_sees_the_server_work(_bench_dsn: str) -> None:
    postmaster = local_postmaster(_bench_dsn)
    assert postmaster is not None
    with psycopg.connect(_bench_dsn) as conn, cpu_window(postmaster) as use:
        conn.execute("SELECT count(*) FROM generate_series(1, 3000000)").fetchone()
    assert use.server_seconds is not None and use.server_seconds >= 0.05
    assert use.client_seconds is not None and use.client_seconds < use.server_seconds


def test_drain_through_pgbouncer(_bench_dsn: str, tmp_path: Path) -> None:
    try:
        find_pgbouncer()
    except PgBouncerUnavailable as exc:
        pytest.skip(f"server unavailable: {exc}")
    doc = bench(
        _bench_dsn,
        tmp_path,
        "drain --pgbouncer --jobs 100 --consumers 2 --batch 5 --driver psycopg,asyncpg",
    )
    assert doc["arguments"]["pgbouncer"] is True
    for row in doc["results"]:
        assert row["engine"] == "postgres [pgbouncer]"
        check_drained(row, 100)


def test_batch_insert_compares_each_systems_fastest_driver() -> None:
    def row(system: str, driver: str, rate: float) -> dict[str, Any]:
        return {"system": system, "driver": driver, "available": True, "enqueue_jobs_per_s": rate}

    rows = [
        row("alkstore", "psycopg", 50_000),
        row("alkstore", "psycopg", 60_000),
        row("alkstore", "pg8000", 18_000),
        row("alkstore", "pg8000", 19_000),
        row("alkstore", "asyncpg", 40_000),
        row("alkstore", "asyncpg", 45_000),
        row("pg-boss", "node-postgres", 40_000),
        row("pg-boss", "node-postgres", 48_000),
        {"system": "pgqueuer", "driver": "asyncpg", "available": False},
    ]
    ours, boss, queuer = _enqueue_ratios(rows, ["pg-boss", "pgqueuer"])
    # Over all of alkstore's cells the median would be 45,000 (pg8000's cells pull it down).
    assert (ours["driver"], ours["enqueue_jobs_per_s"]) == ("psycopg", 60_000)
    assert (boss["driver"], boss["enqueue_jobs_per_s"]) == ("node-postgres", 48_000)
    assert boss["ratio"] == 60_000 / 48_000
    assert queuer["enqueue_jobs_per_s"] is None and queuer["ratio"] is None


def test_pressure(_bench_dsn: str, tmp_path: Path) -> None:
    doc = bench(
        _bench_dsn,
        tmp_path,
        "pressure --systems alkstore,raw-sql --rate 100 --consumers 2 --batch 5 --before 1 "
        "--hold-seconds 2 --after 1 --window 1 --poll 0.02 --history 100",
    )
    rows = doc["results"]
    assert {(r["system"], r["hold"], r["phase"]) for r in rows} == {
        (system, hold, phase)
        for system in ("alkstore", "raw-sql")
        for hold in ("idle", "readers")
        for phase in ("before", "during", "after")
    }
    for row in rows:
        assert row["duplicates"] == 0 and row["reordered"] == 0, row
        assert row["jobs_per_s"] > 0 and row["claim_p99_ms"] > 0, row
        assert row["table_mb"] > 0, row
    for timeline in doc["timelines"]:
        assert len(timeline["windows"]) == 4
        # The consumers stop with the producer: what is left is at most a few polls' worth.
        assert 0 <= timeline["sent"] - timeline["completed"] <= 30, timeline


@pytest.mark.parametrize(("hold", "sessions"), [("idle", 1), ("readers", 4)])
def test_a_pressure_hold_pins_the_horizon_until_released(
    _bench_dsn: str, hold: str, sessions: int
) -> None:
    schema = "pressure_hold_test"
    pinned = """SELECT count(*) FROM pg_stat_activity
        WHERE pid <> pg_backend_pid() AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)
            AND datname = current_database()"""
    with psycopg.connect(_bench_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.job (data jsonb)")
        try:

            def holding() -> int:
                row = conn.execute(pinned).fetchone()
                return int(row[0]) if row else 0

            with held(_bench_dsn, hold, f"{schema}.job", threading.Event()):
                deadline = time.monotonic() + 10
                while holding() < sessions and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert holding() == sessions
            assert holding() == 0
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_pressure_phases_from_a_trace() -> None:
    spec = PressureSpec(
        rate=10, consumers=1, batch=1, before=2, hold=2, after=2, window=1, poll=0.1
    )
    trace = Trace(
        sent=[(t + 0.1, 10) for t in range(6)],
        done=[(0.5, 10), (1.5, 10), (2.5, 5), (3.5, 5), (4.5, 15), (5.5, 15)],
        fetches=[(0.4, 0.001), (2.4, 0.010), (4.4, 0.002)],
    )
    rows = {r["phase"]: r for r in phases("x", "idle", spec, trace, [])}
    assert rows["before"]["jobs_per_s"] == 10 and rows["before"]["worst_window_share"] == 1
    assert rows["during"]["jobs_per_s"] == 5 and rows["during"]["max_depth"] == 10
    assert rows["during"]["claim_p99_ms"] == 10
    assert rows["after"]["jobs_per_s"] == 15 and rows["after"]["max_depth"] == 5


@pytest.fixture(scope="module")
def _room_for_eight() -> Iterator[str]:
    """A server with room for 8 connections (3 of them kept for superusers): twelve
    consumers with a connection each would pass it."""
    with TempCluster(max_connections=8) as cluster:
        yield cluster.dsn


def capped_bench(dsn: str, tmp_path: Path, command: str) -> dict[str, Any]:
    """``command`` with 12 consumers sharing 2 connections, 600 jobs: every job completed once."""
    doc = bench(dsn, tmp_path, f"{command} --connections 2 --jobs 600 --consumers 12 --batch 5")
    assert doc["arguments"]["connections"] == 2
    for row in doc["results"]:
        check_drained(row, 600)
    return doc


def test_drain_connections_caps_the_store_below_the_consumers(
    _room_for_eight: str, tmp_path: Path
) -> None:
    doc = capped_bench(_room_for_eight, tmp_path, "drain --driver psycopg,asyncpg")
    assert {row["engine"] for row in doc["results"]} == {"postgres [2 connections]"}


def test_drain_connections_refuses_zero(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "drain", "--connections", "0", "--json", str(tmp_path / "d.json")])


def test_peers_connections_share_fewer_connections_than_consumers(
    _room_for_eight: str, tmp_path: Path
) -> None:
    doc = capped_bench(_room_for_eight, tmp_path, "peers --peers raw-sql")
    assert {(r["system"], r["engine"]) for r in doc["results"]} == {
        ("alkstore", "postgres [2 connections]"),
        ("raw-sql [2 connections]", None),
    }


def test_peers_connections_refuse_a_peer_that_cannot_share(
    _bench_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "refused.json"
    args = [
        "peers",
        "--connections",
        "2",
        "--jobs",
        "10",
        "--peers",
        "raw-sql,pgqueuer",
        "--no-progress",
    ]
    assert main(["bench", *args, "--dsn", _bench_dsn, "--json", str(path)]) == 1
    assert "['pgqueuer'] cannot share fewer connections" in capsys.readouterr().err
    assert not path.exists()  # refused before anything ran
