"""The PGlite bridge with real Node.js, real npm packages and real database clients.

Timings and memory are printed (run with ``-s`` to see them), never asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from alkstore.engines.pglite import Bridge, BridgeError, ensure_installed, start_bridge
from alkstore.engines.pglite import bridge as bridge_module

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="Node.js (node and npm) is not installed",
)

SRC = Path(__file__).resolve().parents[1] / "src"
EXIT_DEADLINE = 20.0


# -- helpers -----------------------------------------------------------------------------------


def wait_until(predicate: Callable[[], bool], deadline_s: float, what: str) -> float:
    """Poll ``predicate`` until true; return the seconds it took; fail after the deadline."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > deadline_s:
            pytest.fail(f"{what}: not within {deadline_s} s")
        time.sleep(0.02)
    return time.monotonic() - start


def pid_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (a zombie nobody reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def psycopg_connect(b: Bridge, **kwargs: object):  # type: ignore[no-untyped-def]
    psycopg = pytest.importorskip("psycopg")
    return psycopg.connect(b.dsn, prepare_threshold=None, autocommit=True, **kwargs)


def report(label: str, value: object) -> None:
    print(f"\n[pglite-bridge] {label}: {value}", flush=True)


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def installed() -> Path:
    """The npm packages, installed once into the per-user cache (or $ALKSTORE_PGLITE_CACHE)."""
    start = time.monotonic()
    path = ensure_installed()
    report("ensure_installed (user cache)", f"{time.monotonic() - start:.2f} s -> {path}")
    return path


@pytest.fixture(scope="module")
def mem_bridge(installed: Path) -> Iterator[Bridge]:
    """One in-memory bridge shared by the read-mostly tests; short queue timeout."""
    b = start_bridge(None, queue_timeout=2.0)
    report("fresh in-memory start", f"{b.startup_seconds:.2f} s")
    report("node RSS after start (in-memory)", f"{rss_mb(b.pid)} MB")
    try:
        yield b
    finally:
        report("node RSS at end of module (in-memory)", f"{rss_mb(b.pid)} MB")
        assert b.close() == 0


@pytest.fixture(scope="module")
def template_dir(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory initialised once; copies of it reopen in well under a second."""
    data = tmp_path_factory.mktemp("pglite-template") / "pgdata"
    b = start_bridge(data)
    report("fresh persistent start", f"{b.startup_seconds:.2f} s")
    report("node RSS after start (persistent)", f"{rss_mb(b.pid)} MB")
    assert b.close() == 0
    return data


@pytest.fixture
def data_dir(template_dir: Path, tmp_path: Path) -> Path:
    """A fresh, already initialised data directory of this test's own."""
    target = tmp_path / "pgdata"
    shutil.copytree(template_dir, target, ignore=shutil.ignore_patterns(".alkstore-bridge.lock"))
    return target


# -- (a) clients -------------------------------------------------------------------------------


def test_ready_line_describes_the_server(mem_bridge: Bridge) -> None:
    info = mem_bridge.info
    assert info["ready"] is True
    assert mem_bridge.port == info["port"] > 0
    assert mem_bridge.pid == info["pid"]
    assert mem_bridge.host == "127.0.0.1"
    assert mem_bridge.pglite_version == "0.5.14"
    assert info["pglite_socket"] == "0.2.17"
    assert (mem_bridge.postgres_version or "").startswith("18.")
    assert mem_bridge.dsn == (
        f"postgresql://postgres@127.0.0.1:{mem_bridge.port}/postgres?sslmode=disable"
    )
    assert mem_bridge.is_running()
    assert mem_bridge.data_dir is None
    report("versions", {k: info[k] for k in ("pglite", "pglite_socket", "postgres")})


def test_psycopg_roundtrip(mem_bridge: Bridge) -> None:
    with psycopg_connect(mem_bridge) as conn:
        version = conn.execute("SELECT version()").fetchone()
        assert version is not None and "PostgreSQL" in version[0]
        conn.execute("CREATE TABLE psy_items (id int PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO psy_items VALUES (%s, %s), (%s, %s)", (1, "one", 2, "two"))
        rows = conn.execute("SELECT id, name FROM psy_items WHERE id >= %s ORDER BY id", (1,))
        assert rows.fetchall() == [(1, "one"), (2, "two")]
        # server-side prepared statements work too (named, extended protocol)
        for i in range(3):
            got = conn.execute("SELECT %s::int * 2", (i,), prepare=True).fetchone()
            assert got == (i * 2,)
        conn.execute("DROP TABLE psy_items")


def test_pg8000_query(mem_bridge: Bridge) -> None:
    pg8000_native = pytest.importorskip("pg8000.native")
    conn = pg8000_native.Connection(
        mem_bridge.user, host=mem_bridge.host, port=mem_bridge.port, database=mem_bridge.database
    )
    try:
        assert conn.run("SELECT :a::int + 1, :b::text", a=41, b="x") == [[42, "x"]]
        conn.run("CREATE TABLE p8_items (id int)")
        conn.run("INSERT INTO p8_items VALUES (:v)", v=7)
        assert conn.run("SELECT id FROM p8_items") == [[7]]
        conn.run("DROP TABLE p8_items")
    finally:
        conn.close()


def test_asyncpg_query(mem_bridge: Bridge) -> None:
    asyncpg = pytest.importorskip("asyncpg")

    async def run() -> list[tuple[int, str]]:
        conn = await asyncpg.connect(mem_bridge.dsn, statement_cache_size=0)
        try:
            await conn.execute("CREATE TABLE apg_items (id int, name text)")
            async with conn.transaction():
                await conn.executemany(
                    "INSERT INTO apg_items VALUES ($1, $2)", [(1, "a"), (2, "b")]
                )
            rows = await conn.fetch("SELECT id, name FROM apg_items WHERE id > $1", 0)
            await conn.execute("DROP TABLE apg_items")
            return sorted((r["id"], r["name"]) for r in rows)
        finally:
            # The bridge closes the socket on Terminate like PostgreSQL does, so close()
            # returns promptly; still never wait unbounded.
            try:
                await asyncio.wait_for(conn.close(), timeout=5.0)
            except TimeoutError:
                conn.terminate()
                raise

    assert asyncio.run(run()) == [(1, "a"), (2, "b")]


def test_queue_features(mem_bridge: Bridge) -> None:
    """What a job queue needs: SKIP LOCKED, LISTEN/NOTIFY, list partitioning, plpgsql."""
    with psycopg_connect(mem_bridge) as conn:
        conn.execute(
            "CREATE TABLE jobs (id bigserial, state text NOT NULL, payload jsonb)"
            " PARTITION BY LIST (state)"
        )
        conn.execute("CREATE TABLE jobs_ready PARTITION OF jobs FOR VALUES IN ('ready')")
        conn.execute("CREATE TABLE jobs_other PARTITION OF jobs DEFAULT")
        conn.execute(
            "INSERT INTO jobs (state, payload)"
            " VALUES ('ready', %s), ('ready', '{}'), ('done', '{}')",
            (json.dumps({"n": 1}),),
        )
        where = conn.execute("SELECT tableoid::regclass::text, state FROM jobs ORDER BY id")
        assert where.fetchall() == [
            ("jobs_ready", "ready"),
            ("jobs_ready", "ready"),
            ("jobs_other", "done"),
        ]
        with conn.transaction():
            got = conn.execute(
                "SELECT id FROM jobs WHERE state = 'ready' ORDER BY id"
                " FOR UPDATE SKIP LOCKED LIMIT 1"
            ).fetchall()
            assert got == [(1,)]
            conn.execute("UPDATE jobs SET state = 'done' WHERE id = %s", (got[0][0],))
        assert conn.execute("SELECT count(*) FROM jobs_ready").fetchone() == (1,)
        conn.execute(
            """
            CREATE FUNCTION bump(x int) RETURNS int LANGUAGE plpgsql AS $$
            BEGIN
              IF x < 0 THEN RAISE EXCEPTION 'negative: %', x; END IF;
              RETURN x + 1;
            END $$
            """
        )
        assert conn.execute("SELECT bump(41)").fetchone() == (42,)
        conn.execute("LISTEN jobs_channel")
        conn.execute("NOTIFY jobs_channel, 'hello'")
        conn.execute("SELECT pg_notify('jobs_channel', 'world')")
        got_notes = [(n.channel, n.payload) for n in conn.notifies(timeout=5.0, stop_after=2)]
        assert got_notes == [("jobs_channel", "hello"), ("jobs_channel", "world")]
        conn.execute("UNLISTEN *")
        conn.execute("DROP TABLE jobs")
        conn.execute("DROP FUNCTION bump(int)")


def test_client_dying_mid_transaction_is_rolled_back(mem_bridge: Bridge) -> None:
    with psycopg_connect(mem_bridge) as conn:
        conn.execute("CREATE TABLE txn_items (id int)")
    conn = psycopg_connect(mem_bridge)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO txn_items VALUES (1)")
    conn.close()  # drops the socket with the transaction open
    with psycopg_connect(mem_bridge, connect_timeout=10) as conn:
        assert conn.execute("SELECT count(*) FROM txn_items").fetchone() == (0,)
        conn.execute("DROP TABLE txn_items")


def test_prepared_statements_end_with_the_last_client(mem_bridge: Bridge) -> None:
    psycopg = pytest.importorskip("psycopg")

    def connect():  # type: ignore[no-untyped-def]
        return psycopg.connect(mem_bridge.dsn, autocommit=True, connect_timeout=10)

    # psycopg names a connection's prepared statements _pg3_0, _pg3_1, ... from scratch.
    for i in range(3):
        with connect() as conn:
            assert conn.execute("SELECT %s::int", (i,), prepare=True).fetchone() == (i,)
            prepared = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
            assert prepared == [("_pg3_0",)]
    # One closed mid-transaction too: rolled back first, then its statements are gone.
    conn = connect()
    conn.execute("BEGIN")
    conn.execute("SELECT 1", prepare=True)
    conn.close()
    with connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)


def test_pipelined_messages_after_an_error_still_run_in_order(mem_bridge: Bridge) -> None:
    # Messages sent in one write go to PGlite in one pass: the error of the first statement
    # must end at its Sync, and the replies come back in order.
    def query(sql: str) -> bytes:
        body = sql.encode() + b"\x00"
        return b"Q" + (len(body) + 4).to_bytes(4, "big") + body

    def extended(sql: str) -> bytes:
        def msg(kind: bytes, body: bytes) -> bytes:
            return kind + (len(body) + 4).to_bytes(4, "big") + body

        return (
            msg(b"P", b"\x00" + sql.encode() + b"\x00\x00\x00")
            + msg(b"B", b"\x00\x00" + b"\x00\x00" + b"\x00\x00" + b"\x00\x00")
            + msg(b"E", b"\x00\x00\x00\x00\x00")
            + msg(b"S", b"")
        )

    sock = _started_socket(mem_bridge)
    try:
        sock.sendall(
            extended("SELECT 1/0") + extended("SELECT 'after an error'") + query("SELECT 'simple'")
        )
        got = b""
        while got.count(b"Z\x00\x00\x00\x05") < 3:  # three ReadyForQuery
            chunk = sock.recv(65536)
            assert chunk, "bridge closed the connection"
            got += chunk
    finally:
        sock.close()
    assert b"22012" in got  # division by zero
    assert got.index(b"22012") < got.index(b"after an error") < got.index(b"simple")


def test_reconnect_right_after_close_is_not_refused(mem_bridge: Bridge) -> None:
    for i in range(25):
        with psycopg_connect(mem_bridge, connect_timeout=10) as conn:
            assert conn.execute("SELECT %s::int", (i,)).fetchone() == (i,)


def test_second_connection_waits_for_the_first(mem_bridge: Bridge) -> None:
    first = psycopg_connect(mem_bridge)
    result: list[object] = []

    def second() -> None:
        try:
            with psycopg_connect(mem_bridge, connect_timeout=10) as conn:
                result.append(conn.execute("SELECT 2").fetchone())
        except Exception as exc:
            result.append(exc)

    thread = threading.Thread(target=second)
    thread.start()
    try:
        assert first.execute("SELECT 1").fetchone() == (1,)
        assert not result  # still queued behind the first connection
    finally:
        first.close()
    thread.join(15.0)
    assert result == [(2,)]


def test_second_connection_refused_cleanly_after_queue_timeout(mem_bridge: Bridge) -> None:
    psycopg = pytest.importorskip("psycopg")
    with psycopg_connect(mem_bridge) as first:
        start = time.monotonic()
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            psycopg.connect(mem_bridge.dsn, prepare_threshold=None, connect_timeout=10)
        assert time.monotonic() - start < 8.0
        assert first.execute("SELECT 1").fetchone() == (1,)
    # also with libpq's default SSL negotiation (sslmode=prefer)
    with psycopg_connect(mem_bridge) as first:
        prefer = mem_bridge.dsn.replace("sslmode=disable", "sslmode=prefer")
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            psycopg.connect(prefer, prepare_threshold=None, connect_timeout=10)
        assert first.execute("SELECT 1").fetchone() == (1,)
    assert mem_bridge.is_running()


def test_raw_socket_garbage_does_not_kill_the_bridge(mem_bridge: Bridge) -> None:
    with socket.create_connection((mem_bridge.host, mem_bridge.port), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x08garbage!")
        assert sock.recv(1) == b"E"  # ErrorResponse: invalid startup packet
    with psycopg_connect(mem_bridge, connect_timeout=10) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert mem_bridge.is_running()


def test_gssenc_request_is_declined(mem_bridge: Bridge) -> None:
    # libpq sends this first when it holds Kerberos credentials; pglite-socket alone hangs.
    with socket.create_connection((mem_bridge.host, mem_bridge.port), timeout=5) as sock:
        sock.sendall((8).to_bytes(4, "big") + (80877104).to_bytes(4, "big"))
        assert sock.recv(1) == b"N"


def test_queued_client_reset_does_not_kill_the_bridge(mem_bridge: Bridge) -> None:
    startup = b"\x00\x03\x00\x00user\x00postgres\x00\x00"
    startup = (len(startup) + 4).to_bytes(4, "big") + startup
    with psycopg_connect(mem_bridge) as first:
        for payload in (b"", b"\x00\x00", startup):
            sock = socket.create_connection((mem_bridge.host, mem_bridge.port), timeout=5)
            if payload:
                sock.sendall(payload)
            # close with RST instead of FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00" * 2)
            sock.close()
        assert first.execute("SELECT 1").fetchone() == (1,)
    with psycopg_connect(mem_bridge, connect_timeout=10) as conn:
        assert conn.execute("SELECT 2").fetchone() == (2,)
    assert mem_bridge.is_running()


def test_cancel_request_does_not_wait_for_a_slot(mem_bridge: Bridge) -> None:
    # A cancel arrives on a second connection while the first is busy; PGlite cannot
    # cancel, but the request must be answered (closed) at once, not queued.
    with psycopg_connect(mem_bridge) as conn:
        start = time.monotonic()
        conn.cancel_safe(timeout=10.0)
        assert time.monotonic() - start < 1.5  # well below the 2 s queue timeout
        assert conn.execute("SELECT 1").fetchone() == (1,)


# -- (b) stdin EOF -----------------------------------------------------------------------------


def test_close_stops_the_bridge(data_dir: Path) -> None:
    b = start_bridge(data_dir)
    pid = b.pid
    assert not pid_gone(pid)
    start = time.monotonic()
    code = b.close(timeout=EXIT_DEADLINE)
    took = wait_until(lambda: pid_gone(pid), EXIT_DEADLINE, "bridge exit after close()")
    report("close() of an idle bridge", f"{time.monotonic() - start + took:.2f} s")
    assert code == 0  # exited by itself on stdin EOF, not killed
    assert not b.is_running()
    assert b.close() == 0  # idempotent


def test_forked_child_does_not_keep_the_bridge_alive(data_dir: Path) -> None:
    b = start_bridge(data_dir)
    release_r, release_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - child process
        try:
            os.read(release_r, 1)
        finally:
            os._exit(0)
    try:
        start = time.monotonic()
        code = b.close(timeout=10.0)
        took = time.monotonic() - start
        # Had the child kept the stdin pipe open, close() would wait 10 s, then SIGTERM.
        assert code == 0
        assert took < 5.0
    finally:
        os.write(release_w, b"x")
        os.waitpid(child, 0)
        os.close(release_r)
        os.close(release_w)


# -- (c) kill -9 of the Python parent ----------------------------------------------------------


def test_bridge_dies_with_its_python_parent(data_dir: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from alkstore.engines.pglite import start_bridge
        b = start_bridge(sys.argv[1])
        print(b.pid, flush=True)
        while True:
            time.sleep(60)
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(data_dir)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()  # bounded by start_bridge's own 60 s timeout
        assert line.strip().isdigit(), (line, parent.stderr.read() if parent.stderr else "")
        bridge_pid = int(line)
        assert not pid_gone(bridge_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        took = wait_until(lambda: pid_gone(bridge_pid), EXIT_DEADLINE, "bridge exit")
        report("bridge exit after kill -9 of its Python parent", f"{took:.2f} s")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def _started_socket(b: Bridge) -> socket.socket:
    """A raw client socket past the startup message, at the first ReadyForQuery."""
    startup = b"\x00\x03\x00\x00user\x00postgres\x00\x00"
    startup = (len(startup) + 4).to_bytes(4, "big") + startup
    sock = socket.create_connection((b.host, b.port), timeout=10)
    sock.sendall(startup)
    got = b""
    while not got.endswith(b"Z\x00\x00\x00\x05I"):  # ReadyForQuery (idle)
        chunk = sock.recv(65536)
        assert chunk, "bridge closed the connection during startup"
        got += chunk
    return sock


def _wedge(b: Bridge) -> None:
    """Send a protocol-violating message: PGlite answers FATAL and then spins forever."""
    sock = _started_socket(b)
    sock.sendall(b"\x01\x00\x00\x00\x04")  # message type 1 does not exist
    assert sock.recv(1) == b"E"
    sock.close()


def test_stuck_bridge_is_killed_by_close(data_dir: Path) -> None:
    b = start_bridge(data_dir)
    _wedge(b)
    start = time.monotonic()
    code = b.close(timeout=1.0)  # stdin EOF and SIGTERM go unheard; SIGKILL follows
    took = time.monotonic() - start
    report("close() of a stuck bridge (timeout=1)", f"{took:.2f} s, status {code}")
    assert code == -signal.SIGKILL
    assert took < 15


def test_stuck_bridge_dies_with_its_python_parent(data_dir: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from alkstore.engines.pglite import start_bridge
        from test_pglite_bridge import _wedge
        b = start_bridge(sys.argv[1])
        _wedge(b)
        print(b.pid, flush=True)
        while True:
            time.sleep(60)
        """
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(SRC), str(Path(__file__).parent)]),
        ALKSTORE_PGLITE_WATCHDOG_GRACE_MS="1000",
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(data_dir)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), (line, parent.stderr.read() if parent.stderr else "")
        bridge_pid = int(line)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        took = wait_until(lambda: pid_gone(bridge_pid), EXIT_DEADLINE, "stuck bridge exit")
        report("stuck bridge exit after kill -9 of its parent (grace 1 s)", f"{took:.2f} s")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


# -- (d) persistence ---------------------------------------------------------------------------


def test_persistent_dir_survives_close_and_reopen(installed: Path, tmp_path: Path) -> None:
    data = tmp_path / "pgdata"  # initialised here, not copied
    b = start_bridge(data)
    try:
        assert b.data_dir == data.absolute()
        with psycopg_connect(b) as conn:
            conn.execute("CREATE TABLE kept (id int, note text)")
            conn.execute("INSERT INTO kept VALUES (%s, %s)", (1, "first"))
        # the directory is locked while the bridge runs
        with pytest.raises(BridgeError, match="in use by another bridge"):
            start_bridge(data, timeout=1.0)
    finally:
        assert b.close() == 0
    assert (data / "PG_VERSION").is_file()

    again = start_bridge(data)
    report("reopen persistent", f"{again.startup_seconds:.2f} s")
    report("node RSS after reopen (persistent)", f"{rss_mb(again.pid)} MB")
    try:
        with psycopg_connect(again) as conn:
            assert conn.execute("SELECT id, note FROM kept").fetchall() == [(1, "first")]
    finally:
        assert again.close() == 0


def test_close_with_a_client_mid_transaction(data_dir: Path) -> None:
    data = data_dir
    b = start_bridge(data)
    conn = psycopg_connect(b)
    try:
        conn.execute("CREATE TABLE mixed (id int)")
        conn.execute("INSERT INTO mixed VALUES (1)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO mixed VALUES (2)")
        assert b.close(timeout=EXIT_DEADLINE) == 0  # clean exit despite the open client
    finally:
        conn.close()
    with start_bridge(data) as again, psycopg_connect(again) as conn2:
        assert conn2.execute("SELECT id FROM mixed").fetchall() == [(1,)]


def test_committed_row_survives_kill_9_of_the_bridge(data_dir: Path) -> None:
    data = data_dir
    b = start_bridge(data)
    try:
        with psycopg_connect(b) as conn:
            conn.execute("CREATE TABLE durable (id int)")
            got = conn.execute("INSERT INTO durable VALUES (42) RETURNING id").fetchone()
            assert got == (42,)
            os.kill(b.pid, signal.SIGKILL)
            wait_until(lambda: not b.is_running(), EXIT_DEADLINE, "bridge death after SIGKILL")
    finally:
        b.close()
    assert b.returncode == -signal.SIGKILL

    again = start_bridge(data)
    report("reopen after kill -9", f"{again.startup_seconds:.2f} s")
    try:
        with psycopg_connect(again) as conn:
            assert conn.execute("SELECT id FROM durable").fetchall() == [(42,)]
    finally:
        assert again.close() == 0


# -- (e) errors --------------------------------------------------------------------------------


def test_missing_node_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(BridgeError, match=r"`node` was not found on PATH.*Node\.js 20\+"):
        start_bridge(None, timeout=10)


def test_data_dir_under_a_regular_file(installed: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    bogus = blocker / "pgdata"
    start = time.monotonic()
    with pytest.raises(BridgeError, match="data directory") as info:
        start_bridge(bogus, timeout=30)
    assert str(bogus) in str(info.value)
    assert "Not a directory" in str(info.value)
    assert time.monotonic() - start < 10


def test_data_dir_that_is_a_file(installed: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(BridgeError, match="exists but is not a directory"):
        start_bridge(blocker, timeout=30)


def test_bridge_error_is_reported_not_hung(installed: Path, tmp_path: Path) -> None:
    """PGlite itself refuses this directory: the bridge's own message reaches Python."""
    data = tmp_path / "broken"
    data.mkdir()
    (data / "PG_VERSION").write_text("99\n")
    start = time.monotonic()
    with pytest.raises(BridgeError, match="bridge failed to start") as info:
        start_bridge(data, timeout=30)
    message = str(info.value)
    assert str(data) in message
    assert "PGlite failed to initialize" in message
    assert "bridge stderr" in message
    assert time.monotonic() - start < 25


def test_no_ready_line_before_deadline_kills_the_bridge(installed: Path) -> None:
    start = time.monotonic()
    with pytest.raises(BridgeError, match=r"no ready line within 0\.3 s and was killed"):
        start_bridge(None, timeout=0.3)
    assert time.monotonic() - start < 10


# -- (f) install once, then offline ------------------------------------------------------------


def test_second_install_is_offline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path
) -> None:
    monkeypatch.setenv(bridge_module.CACHE_ENV, str(tmp_path / "cache"))
    start = time.monotonic()
    first = ensure_installed()
    report("fresh npm ci into an empty cache", f"{time.monotonic() - start:.2f} s")
    assert first.parent == tmp_path / "cache"
    assert first.name.startswith("pglite-") and len(first.name) == len("pglite-") + 16
    marker = first / ".alkstore-installed"
    assert marker.is_file()
    assert (first / "node_modules" / "@electric-sql" / "pglite").is_dir()
    source = Path(bridge_module.__file__).with_name("bridge.mjs").read_bytes()
    scripts = list(first.glob("bridge-*.mjs"))
    assert [p.read_bytes() for p in scripts] == [source]
    marker_mtime = marker.stat().st_mtime_ns
    leftovers = [p.name for p in first.parent.iterdir() if ".tmp-" in p.name]
    assert leftovers == []

    # No npm on PATH any more (node stays reachable): the second call must not need it.
    node_only = tmp_path / "node-only-bin"
    node_only.mkdir()
    node = shutil.which("node")
    assert node is not None
    (node_only / "node").symlink_to(node)
    monkeypatch.setenv("PATH", str(node_only))
    assert shutil.which("npm") is None
    # a missing copy of this version of the script is written again, without npm
    scripts[0].unlink()
    second = ensure_installed()
    assert second == first
    assert marker.stat().st_mtime_ns == marker_mtime
    assert [p.read_bytes() for p in first.glob("bridge-*.mjs")] == [source]
    # and a bridge starts from it without npm
    with start_bridge(data_dir) as b, psycopg_connect(b) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
