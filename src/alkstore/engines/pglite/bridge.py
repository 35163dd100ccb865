"""Start and own a PGlite bridge: PostgreSQL (WASM) served over the wire protocol by Node.js.

The bridge is ``bridge.mjs`` run by ``node``. It hosts one PGlite instance (in memory, or
persistent in a data directory) behind ``@electric-sql/pglite-socket`` on ``127.0.0.1`` and a
port chosen by the OS, prints one JSON "ready" line on stdout and then serves until its stdin
reaches end of file (lines written to stdin before that are requests, see
:meth:`Bridge.dump_data_dir`). Python keeps the write end of that pipe, so the bridge never
outlives the Python process that started it, even after ``kill -9`` of Python.

The npm packages are installed once per user, on first use, into a cache directory keyed by a
hash of ``package-lock.json`` (``$ALKSTORE_PGLITE_CACHE``, else
``$XDG_CACHE_HOME/alkstore``, else ``~/.cache/alkstore``). Later starts need no network.

Facts worth knowing when connecting (pglite-socket 0.2, PGlite 0.5):

* PGlite is a single backend session. Every client connection shares its session state
  (settings, temporary tables, ``LISTEN`` registrations); transactions run one at a time.
  The bridge serves ``max_connections`` clients (default 1); more wait in a queue for up to
  ``queue_timeout`` seconds and are then refused with SQLSTATE 53300.
* Any user name, password and database name are accepted; the session is always user
  ``postgres`` in database ``postgres``.
* Prepared statements outlive the client that made them until the last client served
  disconnects: the bridge then deallocates them all. Clients served at the same time need
  psycopg's ``prepare_threshold=None`` and asyncpg's ``statement_cache_size=0`` (their
  statement names would collide); asyncpg's ``close()`` can hang (use ``terminate()`` after a
  timeout); pg8000 works as is.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

from ...core.errors import AlkstoreError

__all__ = [
    "CACHE_ENV",
    "DEFAULT_DATABASE",
    "DEFAULT_USER",
    "Bridge",
    "BridgeError",
    "cache_root",
    "ensure_installed",
    "start_bridge",
]

CACHE_ENV: Final = "ALKSTORE_PGLITE_CACHE"
"""Environment variable naming the cache root that holds the installed npm packages."""

DEFAULT_USER: Final = "postgres"
"""User name of the PGlite session (pglite-socket accepts any name; this is the real one)."""

DEFAULT_DATABASE: Final = "postgres"
"""Database name of the PGlite session (pglite-socket accepts any name; this is the real one)."""

MIN_NODE_MAJOR: Final = 20

_PACKAGE_DIR: Final = Path(__file__).resolve().parent
_PACKAGE_FILES: Final = ("package.json", "package-lock.json")
_BRIDGE_SCRIPT: Final = "bridge.mjs"
_MARKER: Final = ".alkstore-installed"
_INSTALL_LOCK: Final = ".pglite-install.lock"
_DATA_DIR_LOCK: Final = ".alkstore-bridge.lock"
_TAIL_LINES: Final = 60
_POLL: Final = 0.05
_DATA_DIR_LOCK_WAIT: Final = 15.0  # a bridge whose parent died needs well under this to exit

_node_versions: dict[str, tuple[int, ...]] = {}
_node_versions_lock = threading.Lock()

# Bridges whose stdin pipe a forked child must not keep open (see _after_fork_in_child).
_live_bridges: weakref.WeakSet[Bridge] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """In a forked child, point inherited bridge stdin pipes at /dev/null.

    Otherwise a child made with ``os.fork`` (e.g. multiprocessing's "fork" start method) keeps
    the write end open: the bridge would not see EOF when its owner closes it or dies. The
    descriptor numbers stay valid (dup2), so the child's copies of the file objects are safe.
    """
    bridges = list(_live_bridges)
    if not bridges:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        for bridge in bridges:
            fd = bridge._stdin_fd()
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.dup2(devnull, fd)
    finally:
        os.close(devnull)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class BridgeError(AlkstoreError, RuntimeError):
    """The PGlite bridge could not be installed, started or stopped; the message says why."""


# --------------------------------------------------------------------------------------------
# Installation
# --------------------------------------------------------------------------------------------


def cache_root() -> Path:
    """Return the directory under which installed bridge versions live.

    ``$ALKSTORE_PGLITE_CACHE`` if set, else ``$XDG_CACHE_HOME/alkstore``, else
    ``~/.cache/alkstore``.
    """
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "alkstore").absolute()


def _install_key() -> str:
    digest = hashlib.sha256()
    for name in reversed(_PACKAGE_FILES):  # package-lock.json first
        digest.update(_read_package_file(name))
    return digest.hexdigest()[:16]


def _read_package_file(name: str) -> bytes:
    path = _PACKAGE_DIR / name
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BridgeError(
            f"the alkstore installation is incomplete: cannot read {path} ({exc}); "
            "reinstall alkstore (the wheel must include the pglite .json and .mjs files)"
        ) from exc


def _tail(text: str, lines: int = 25) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def _which(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        raise BridgeError(
            f"`{program}` was not found on PATH; the PGlite engine runs PostgreSQL inside "
            f"Node.js: install Node.js {MIN_NODE_MAJOR}+ (which provides `node` and `npm`, "
            "e.g. from https://nodejs.org or your package manager) and make sure both are on PATH"
        )
    return found


_WASM_TIERING_BUDGET: Final = 18_000_000
"""V8's budget before a WASM function is recompiled by its optimising compiler: 10 times the
default. With the default, a reopened bridge spent about 0.2 s of CPU before ready (of 0.6 s)
optimising PostgreSQL functions that had barely run, competing for the cores with the start
itself. At 100 times the default, 4 of 60 demo drains stalled for 15 s to 2.5 min (124 to
1,968 jobs/s) with node at full CPU, against none of 60 at the default and none of 60 at 10
times (docs/benchmarks.md, "PGlite demo, this session")."""

_NODE_ENV_DROPPED: Final = ("NODE_EXTRA_CA_CERTS",)
"""Variables the ``node`` runs do without: Node 20 reads the extra CA certificates at start
(0.12 s a start with a system bundle, measured), and the bridge makes no TLS connection."""


def _node_env() -> dict[str, str]:
    """The environment of the ``node`` runs: this process's, less :data:`_NODE_ENV_DROPPED`."""
    return {k: v for k, v in os.environ.items() if k not in _NODE_ENV_DROPPED}


def _check_node_version(node: str) -> tuple[int, ...]:
    with _node_versions_lock:
        cached = _node_versions.get(node)
    if cached is not None:
        return cached
    try:
        out = subprocess.run(
            [node, "--version"],
            env=_node_env(),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BridgeError(f"cannot run `{node} --version`: {exc}") from exc
    raw = out.stdout.strip().lstrip("v")
    try:
        version = tuple(int(part) for part in raw.split(".")[:3])
    except ValueError:
        version = ()
    if not version or version[0] < MIN_NODE_MAJOR:
        raise BridgeError(
            f"`{node}` is Node.js {raw or 'of unknown version'}; the PGlite engine needs "
            f"Node.js {MIN_NODE_MAJOR}+: install a newer Node.js and put it first on PATH"
        )
    with _node_versions_lock:
        _node_versions[node] = version
    return version


def _lock_with_deadline(fd: int, deadline: float) -> bool:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL * 2)


def _bridge_script(install_dir: Path) -> Path:
    """Return the bridge script next to ``node_modules``, copying it there if needed.

    ESM resolution ignores NODE_PATH, so the script must live in the install directory. Its
    name carries a hash of its content: processes running different alkstore versions that
    share one install directory never overwrite each other's script, and a copy is written
    once, atomically.
    """
    source = _read_package_file(_BRIDGE_SCRIPT)
    digest = hashlib.sha256(source).hexdigest()[:12]
    target = install_dir / f"bridge-{digest}.mjs"
    if target.is_file():
        return target
    try:
        fd, tmp = tempfile.mkstemp(prefix=".bridge-", suffix=".tmp", dir=install_dir)
        with os.fdopen(fd, "wb") as fh:
            fh.write(source)
        os.replace(tmp, target)
    except OSError as exc:
        raise BridgeError(
            f"cannot write {target}: {exc}; make the cache directory writable or point "
            f"${CACHE_ENV} at a writable directory"
        ) from exc
    return target


def _is_installed(install_dir: Path) -> bool:
    return (install_dir / _MARKER).is_file() and (install_dir / "node_modules").is_dir()


def _run_npm_ci(npm: str, workdir: Path, timeout: float) -> None:
    env = dict(os.environ)
    env.setdefault("npm_config_update_notifier", "false")
    env.setdefault("npm_config_loglevel", "error")
    argv = [npm, "ci", "--no-audit", "--no-fund"]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        raise BridgeError(f"cannot run {' '.join(argv)}: {exc}") from exc
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise BridgeError(
            f"`npm ci` did not finish within {timeout:.0f} s installing the PGlite packages "
            f"into {workdir}; check network access to the npm registry (npm config get "
            f"registry) and retry.\nnpm output:\n{_tail(stderr or stdout)}"
        ) from None
    if proc.returncode != 0:
        raise BridgeError(
            f"`npm ci` failed (exit {proc.returncode}) installing the PGlite packages into "
            f"{workdir}; check network access to the npm registry and npm's configuration, "
            f"then retry.\nnpm stderr:\n{_tail(stderr or stdout)}"
        )


def ensure_installed(*, install_timeout: float = 600.0) -> Path:
    """Install the bridge's npm packages once per user and return the install directory.

    The directory is ``cache_root() / "pglite-<key>"`` where ``<key>`` is derived from
    ``package-lock.json`` and ``package.json``. It holds ``node_modules``, the bridge script
    (``bridge-<content hash>.mjs``) and a marker file. When the marker exists nothing is run
    (no npm, no network); the script is only copied if this version of it is missing.
    Otherwise ``npm ci --no-audit --no-fund`` runs in a temporary directory under an exclusive
    file lock, the marker is written last, and the directory is renamed into place atomically,
    so concurrent processes install at most once and never see a half-made installation.

    Raises :class:`BridgeError` if ``npm`` is missing, the install fails or exceeds
    ``install_timeout`` seconds, or the cache directory is not writable.
    """
    root = cache_root()
    install_dir = root / f"pglite-{_install_key()}"
    if _is_installed(install_dir):
        _bridge_script(install_dir)
        return install_dir

    npm = _which("npm")
    _check_node_version(_which("node"))
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(root / _INSTALL_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise BridgeError(
            f"cannot create the PGlite package cache in {root}: {exc}; make it writable or set "
            f"${CACHE_ENV} to a writable directory"
        ) from exc
    try:
        deadline = time.monotonic() + install_timeout + 30.0
        if not _lock_with_deadline(lock_fd, deadline):
            raise BridgeError(
                f"timed out waiting for another process to finish installing the PGlite "
                f"packages in {root} (lock file {root / _INSTALL_LOCK})"
            )
        if _is_installed(install_dir):  # somebody else finished while we waited
            _bridge_script(install_dir)
            return install_dir
        workdir = Path(tempfile.mkdtemp(prefix=f".{install_dir.name}.tmp-", dir=root))
        try:
            for name in _PACKAGE_FILES:
                (workdir / name).write_bytes(_read_package_file(name))
            _run_npm_ci(npm, workdir, install_timeout)
            _bridge_script(workdir)
            (workdir / _MARKER).write_text(
                json.dumps({"installed_at": time.time(), "key": install_dir.name}) + "\n"
            )
            if install_dir.exists():  # a damaged leftover without marker
                shutil.rmtree(install_dir)
            os.rename(workdir, install_dir)
        except OSError as exc:
            raise BridgeError(
                f"cannot install the PGlite packages into {install_dir}: {exc}"
            ) from exc
        finally:
            if workdir.exists():
                shutil.rmtree(workdir, ignore_errors=True)
        return install_dir
    finally:
        os.close(lock_fd)  # also releases the flock


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


class _PipeReader:
    """Drain a child's pipe on a daemon thread; keep the last lines and hand out new ones."""

    def __init__(self, stream: IO[bytes], name: str, *, forward: bool) -> None:
        self._stream = stream
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._lock = threading.Lock()
        self.lines: queue.Queue[str | None] | None = queue.Queue() if forward else None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for raw in iter(self._stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self._lock:
                    self._tail.append(line)
                if self.lines is not None:
                    self.lines.put(line)
        except (OSError, ValueError):
            pass
        finally:
            if self.lines is not None:
                self.lines.put(None)
            with contextlib.suppress(OSError):
                self._stream.close()

    def tail(self) -> str:
        with self._lock:
            return "\n".join(self._tail)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _prepare_data_dir(data_dir: str | os.PathLike[str]) -> Path:
    path = Path(data_dir).expanduser().absolute()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise BridgeError(
            f"PGlite data directory {path} exists but is not a directory; "
            "pass the path of a directory (it is created if missing)"
        ) from exc
    except OSError as exc:
        raise BridgeError(
            f"cannot create the PGlite data directory {path}: {exc.strerror or exc}; "
            "pass a path whose parent is a writable directory"
        ) from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise BridgeError(
            f"PGlite data directory {path} is not writable by this user; "
            "fix its permissions or use another directory"
        )
    return path


def _lock_data_dir(path: Path, deadline: float) -> int:
    lock_path = path / _DATA_DIR_LOCK
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise BridgeError(
            f"PGlite data directory {path} is not writable ({exc.strerror or exc}); "
            "fix its permissions or use another directory"
        ) from exc
    if not _lock_with_deadline(fd, deadline):
        holder = ""
        with contextlib.suppress(OSError, ValueError):
            holder = os.pread(fd, 64, 0).decode().strip()
        os.close(fd)
        who = f" (bridge pid {holder})" if holder else ""
        raise BridgeError(
            f"PGlite data directory {path} is in use by another bridge{who}; only one "
            "process may open a PGlite data directory at a time: close the other one first"
        )
    return fd


def _kill(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Terminate, then kill, the bridge; every wait bounded."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        proc.terminate()
    try:
        proc.wait(grace)
        return
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5.0)


class Bridge:
    """A running PGlite bridge process and how to connect to it.

    Create one with :func:`start_bridge` (or :meth:`Bridge.start`); stop it with
    :meth:`close` or by using it as a context manager. Connect with :attr:`dsn` or with
    :attr:`host`, :attr:`port`, :attr:`user` and :attr:`database`.

    The bridge stops when its stdin pipe closes: on :meth:`close`, when this process exits
    or dies, and also when the object is garbage collected, so keep a reference while the
    database is in use. Forked children do not hold the pipe open.
    """

    host: str
    """The address the bridge listens on (``127.0.0.1``)."""
    port: int
    """The TCP port the OS assigned to the bridge."""
    pid: int
    """Process id of the ``node`` process."""
    data_dir: Path | None
    """The persistent data directory, or ``None`` for an in-memory database."""
    startup_seconds: float
    """Seconds from spawning ``node`` to its ready line (excludes any first-time npm install)."""
    info: Mapping[str, Any]
    """The bridge's ready line: versions (``pglite``, ``pglite_socket``, ``postgres``) etc."""
    user: str = DEFAULT_USER
    """User name to connect with."""
    database: str = DEFAULT_DATABASE
    """Database name to connect with."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        info: Mapping[str, Any],
        *,
        data_dir: Path | None,
        startup_seconds: float,
        stdout: _PipeReader,
        stderr: _PipeReader,
    ) -> None:
        """Wrap an already started bridge; use :func:`start_bridge` instead of calling this."""
        self._proc = proc
        self._stdout = stdout
        self._stderr = stderr
        self._close_lock = threading.Lock()
        self.info = dict(info)
        self.host = str(info.get("host") or "127.0.0.1")
        self.port = int(info["port"])
        self.pid = proc.pid
        self.data_dir = data_dir
        self.startup_seconds = startup_seconds
        _live_bridges.add(self)

    def _stdin_fd(self) -> int | None:
        stdin = self._proc.stdin
        if stdin is None or stdin.closed:
            return None
        try:
            return stdin.fileno()
        except (OSError, ValueError):
            return None

    @classmethod
    def start(
        cls,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 60.0,
        max_connections: int = 1,
        queue_timeout: float = 30.0,
        install_timeout: float = 600.0,
        load_data_dir: Path | None = None,
    ) -> Bridge:
        """Start a bridge; same as :func:`start_bridge`."""
        return start_bridge(
            data_dir,
            timeout=timeout,
            max_connections=max_connections,
            queue_timeout=queue_timeout,
            install_timeout=install_timeout,
            load_data_dir=load_data_dir,
        )

    @property
    def dsn(self) -> str:
        """A libpq-style URL for psycopg or asyncpg (``sslmode=disable``: the bridge has no TLS)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}?sslmode=disable"

    @property
    def pglite_version(self) -> str | None:
        """Version of the ``@electric-sql/pglite`` package serving the database."""
        value = self.info.get("pglite")
        return str(value) if value is not None else None

    @property
    def postgres_version(self) -> str | None:
        """PostgreSQL ``server_version`` reported by PGlite."""
        value = self.info.get("postgres")
        return str(value) if value is not None else None

    @property
    def returncode(self) -> int | None:
        """The bridge's exit status, or ``None`` while it runs."""
        return self._proc.poll()

    def is_running(self) -> bool:
        """Return whether the ``node`` process is still running."""
        return self._proc.poll() is None

    def dump_data_dir(self, target: Path, timeout: float = 60.0) -> int:
        """Write the whole database to the tarball ``target`` and return its size in bytes.

        The bridge checkpoints, dumps to a temporary file next to ``target`` and renames it
        into place, so ``target`` is never seen half written. Call it only while no client
        has a transaction open (the dump runs in the shared session). Raises
        :class:`BridgeError` if the bridge fails or does not answer within ``timeout``.
        """
        request = json.dumps({"dump": str(target)}) + "\n"
        stdin, lines = self._proc.stdin, self._stdout.lines
        if stdin is None or stdin.closed or lines is None:
            raise BridgeError(f"the PGlite bridge (pid {self.pid}) is closed")
        with self._close_lock:
            try:
                stdin.write(request.encode())
                stdin.flush()
            except OSError as exc:
                raise BridgeError(f"the PGlite bridge (pid {self.pid}) is gone: {exc}") from exc
            deadline = time.monotonic() + timeout
            while (remaining := deadline - time.monotonic()) > 0:
                try:
                    line = lines.get(timeout=remaining)
                except queue.Empty:
                    break
                if line is None:
                    raise BridgeError(f"the PGlite bridge (pid {self.pid}) exited while dumping")
                with contextlib.suppress(json.JSONDecodeError):
                    answer = json.loads(line)
                    if isinstance(answer, dict) and "dumped" in answer:
                        if answer["dumped"] is None:
                            raise BridgeError(f"PGlite could not dump: {answer.get('error')}")
                        return int(answer["bytes"])
            raise BridgeError(
                f"the PGlite bridge (pid {self.pid}) did not dump within {timeout:g} s"
            )

    def stderr_tail(self) -> str:
        """Return the last lines the bridge wrote to stderr (for diagnostics)."""
        return self._stderr.tail()

    def close(self, timeout: float = 10.0) -> int | None:
        """Stop the bridge and return its exit status.

        Closes the bridge's stdin, which makes it stop serving, close PGlite (flushing a
        persistent data directory) and exit. If it has not exited after ``timeout`` seconds it
        is sent SIGTERM, then SIGKILL, each with a bounded wait. Idempotent.
        """
        with self._close_lock:
            proc = self._proc
            if proc.stdin is not None and not proc.stdin.closed:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill(proc, grace=5.0)
            self._stdout.join(1.0)
            self._stderr.join(1.0)
            return proc.poll()

    def __enter__(self) -> Self:
        """Return the running bridge."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the bridge (see :meth:`close`)."""
        self.close()

    def __repr__(self) -> str:
        """Show where the bridge listens and what it serves."""
        where = str(self.data_dir) if self.data_dir is not None else "memory"
        state = "running" if self.is_running() else f"exited {self.returncode}"
        return f"<Bridge pid={self.pid} {self.host}:{self.port} data={where} {state}>"


def start_bridge(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    timeout: float = 60.0,
    max_connections: int = 1,
    queue_timeout: float = 30.0,
    install_timeout: float = 600.0,
    load_data_dir: Path | None = None,
) -> Bridge:
    """Start a PGlite bridge and return it once it accepts connections.

    ``data_dir`` is a directory for a persistent database (created if missing; initialised by
    PGlite on first use) or ``None`` for an in-memory one. A data directory may be open in one
    bridge at a time (an exclusive lock inside it, held by the ``node`` process, enforces this).
    ``timeout`` bounds the wait for the bridge's ready line (a fresh database takes a few
    seconds); the first call per user may also run ``npm ci``, bounded by ``install_timeout``.
    ``max_connections`` clients are served at once; extra ones wait up to ``queue_timeout``
    seconds for a free slot, then are refused. ``load_data_dir`` is a tarball written by
    :meth:`Bridge.dump_data_dir`: a fresh database (in memory, or a new data directory) starts
    as a copy of it instead of running initdb.

    Raises :class:`BridgeError`, naming the cause and the fix, if Node.js or npm is missing,
    the install fails, the data directory is unusable or busy, the bridge reports an error or
    exits early, or no ready line arrives in time (the bridge is then killed).
    """
    if max_connections < 1:
        raise ValueError("max_connections must be at least 1")
    node = _which("node")
    _check_node_version(node)
    install_dir = ensure_installed(install_timeout=install_timeout)
    script = _bridge_script(install_dir)
    started = time.monotonic()
    deadline = started + timeout

    data_path = _prepare_data_dir(data_dir) if data_dir is not None else None
    fresh_dir = data_path is not None and not (data_path / "PG_VERSION").exists()
    lock_fd = None
    if data_path is not None:
        lock_fd = _lock_data_dir(data_path, min(deadline, started + _DATA_DIR_LOCK_WAIT))

    argv = [
        node,
        f"--wasm-tiering-budget={_WASM_TIERING_BUDGET}",
        str(script),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--max-connections",
        str(max_connections),
        "--queue-timeout",
        repr(float(queue_timeout)),
    ]
    if data_path is not None:
        argv += ["--data-dir", str(data_path)]
    if load_data_dir is not None:
        argv += ["--load-data-dir", str(load_data_dir)]
    try:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=install_dir,
                env=_node_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # The bridge inherits the data directory lock: it is released only when the
                # node process is gone, even if this Python process dies first.
                pass_fds=(lock_fd,) if lock_fd is not None else (),
                # Keep terminal signals (Ctrl-C) away from the bridge: it stops when we close
                # its stdin, so Python can still use the database while handling SIGINT.
                start_new_session=True,
            )
        except OSError as exc:
            raise BridgeError(f"cannot run {node}: {exc}") from exc
        if lock_fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(lock_fd, 0)
                os.pwrite(lock_fd, f"{proc.pid}\n".encode(), 0)
    finally:
        if lock_fd is not None:
            os.close(lock_fd)  # the child keeps its copy (and so the lock)

    assert proc.stdout is not None and proc.stderr is not None
    stdout = _PipeReader(proc.stdout, f"pglite-bridge-{proc.pid}-stdout", forward=True)
    stderr = _PipeReader(proc.stderr, f"pglite-bridge-{proc.pid}-stderr", forward=False)

    def fail(message: str) -> BridgeError:
        _kill(proc, grace=2.0)
        stderr.join(1.0)
        tail = stderr.tail().strip()
        detail = f"\nbridge stderr (last lines):\n{tail}" if tail else ""
        return BridgeError(message + detail)

    try:
        info = _wait_ready(proc, stdout, deadline, timeout, data_path, fresh_dir, fail)
    except BaseException:
        _kill(proc, grace=2.0)  # e.g. KeyboardInterrupt: never leave a half-started bridge
        raise
    return Bridge(
        proc,
        info,
        data_dir=data_path,
        startup_seconds=time.monotonic() - started,
        stdout=stdout,
        stderr=stderr,
    )


def _wait_ready(
    proc: subprocess.Popen[bytes],
    stdout: _PipeReader,
    deadline: float,
    timeout: float,
    data_path: Path | None,
    fresh_dir: bool,
    fail: Callable[[str], BridgeError],
) -> dict[str, Any]:
    info: dict[str, Any] | None = None
    lines = stdout.lines
    assert lines is not None
    while info is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            hint = (
                f"; the new data directory {data_path} may be left half-initialised: "
                "delete it before retrying"
                if fresh_dir
                else ""
            )
            raise fail(
                f"the PGlite bridge (pid {proc.pid}) printed no ready line within {timeout:g} s "
                "and was killed; a fresh database needs a few seconds, a slow or busy machine "
                f"more: retry with a larger timeout{hint}"
            )
        try:
            line = lines.get(timeout=min(remaining, 0.5))
        except queue.Empty:
            continue
        if line is None:
            try:
                code = proc.wait(min(5.0, max(deadline - time.monotonic(), 0.1)))
            except subprocess.TimeoutExpired:
                code = None
            raise fail(
                f"the PGlite bridge (pid {proc.pid}) exited before it was ready (exit status "
                f"{code})"
            )
        try:
            parsed = json.loads(line)
        except json.JSONDecodeError:
            continue  # not ours; stays in the stdout tail
        if not isinstance(parsed, dict) or "ready" not in parsed:
            continue
        if parsed.get("ready") is not True:
            where = f" for data directory {data_path}" if data_path is not None else ""
            raise fail(f"the PGlite bridge failed to start{where}: {parsed.get('error', parsed)}")
        if not isinstance(parsed.get("port"), int):
            raise fail(f"the PGlite bridge reported no port: {line}")
        info = parsed
    return info
