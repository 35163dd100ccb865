"""A throwaway PostgreSQL cluster for a test run: :class:`TempCluster`.

The cluster lives in a fresh temporary directory, listens on a free loopback port (and on a
unix socket inside that directory), trusts every local connection, and is built for speed,
not safety: ``fsync``, ``synchronous_commit`` and ``full_page_writes`` are off, so a crash of
the machine may corrupt it, which does not matter for data thrown away after the run.

PostgreSQL refuses to run as root. Run as root, the cluster's programs run as the ``postgres``
OS user (or ``nobody`` where that does not exist), which owns the directory; run as anyone
else, they run as that user.

Programs are found through ``pg_config --bindir``, then the newest
``/usr/lib/postgresql/*/bin`` (Debian's layout), then ``PATH``.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import glob
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

from ..core.errors import AlkstoreError

_UNPRIVILEGED_USERS = ("postgres", "nobody")


class ClusterError(AlkstoreError, RuntimeError):
    """The cluster could not be created, started or stopped."""


def find_bindir() -> Path:
    """The directory holding ``initdb``, ``postgres`` and ``pg_ctl``."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=30
            )
            candidates.append(Path(out.stdout.strip()))
    versioned = []
    for path in glob.glob("/usr/lib/postgresql/*/bin"):
        version = Path(path).parent.name
        key = tuple(int(part) for part in version.split(".") if part.isdigit())
        versioned.append((key, Path(path)))
    candidates.extend(path for _, path in sorted(versioned, reverse=True))
    initdb = shutil.which("initdb")
    if initdb is not None:
        candidates.append(Path(initdb).parent)
    for bindir in candidates:
        if all((bindir / tool).is_file() for tool in ("initdb", "postgres", "pg_ctl")):
            return bindir
    raise ClusterError(
        "PostgreSQL server programs (initdb, postgres, pg_ctl) not found: tried pg_config "
        "--bindir, /usr/lib/postgresql/*/bin and PATH"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _world_traversable(path: Path) -> bool:
    """Whether every directory from ``/`` down to ``path`` lets any user pass through."""
    return all(os.stat(directory).st_mode & stat.S_IXOTH for directory in (path, *path.parents))


class ThrowawayProcess:
    """A server process of a test run living in a temporary directory.

    ``stop()`` ends the process (:meth:`_end`), deletes the directory and forgets the port;
    it is idempotent. As a context manager the process starts on entry and stops on exit.
    """

    port: int | None
    directory: Path | None
    _process: subprocess.Popen[bytes] | None

    def start(self) -> str:
        """Start the process; returns its DSN."""
        raise NotImplementedError

    def _end(self, process: subprocess.Popen[bytes]) -> None:
        """End the running ``process``."""
        raise NotImplementedError

    def stop(self) -> None:
        """End the process and delete its directory."""
        atexit.unregister(self.stop)
        process, self._process = self._process, None
        if process is not None:
            self._end(process)
        directory, self.directory = self.directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        self.port = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class TempCluster(ThrowawayProcess):
    """A PostgreSQL cluster in a temporary directory, for tests.

    ``start()`` returns the DSN (``postgresql://postgres@127.0.0.1:PORT/postgres``: trust
    authentication, superuser ``postgres``); ``stop()`` shuts the server down at once and
    deletes the directory. As a context manager it starts on entry (returning the cluster;
    see :attr:`dsn`) and stops on exit. A cluster still running when the interpreter exits
    is stopped then, so a crashed test run does not leave a server behind.
    """

    def __init__(
        self,
        *,
        bindir: Path | str | None = None,
        max_connections: int = 200,
        start_timeout: float = 60.0,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.bindir = Path(bindir) if bindir is not None else find_bindir()
        """Where the PostgreSQL programs are."""
        self.max_connections = max_connections
        """The server's ``max_connections``."""
        self.start_timeout = start_timeout
        """Seconds ``start()`` waits for the server to accept connections."""
        self.settings = dict(settings or {})
        """Extra server settings (``-c name=value``)."""
        self.port: int | None = None
        """The TCP port on 127.0.0.1 (once started)."""
        self.directory: Path | None = None
        """The temporary directory: ``data``, ``socket`` and ``server.log`` (once started)."""
        self._process: subprocess.Popen[bytes] | None = None
        self._user: pwd.struct_passwd | None = None

    # --- public -----------------------------------------------------------------------------

    @property
    def dsn(self) -> str:
        """The DSN of the running cluster."""
        if self.port is None:
            raise ClusterError("the cluster is not running")
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        if self.directory is None:
            raise ClusterError("the cluster was never started")
        return self.directory / "server.log"

    def start(self) -> str:
        """Create the cluster, start the server, wait until it accepts connections; the DSN."""
        if self._process is not None:
            return self.dsn
        self._user = self._run_as()
        self.directory = self._make_directory()
        atexit.register(self.stop)
        try:
            self._initdb()
            for attempt in range(3):
                try:
                    self._start_server()
                    break
                except _PortTaken:
                    if attempt == 2:
                        raise ClusterError(
                            "no free port after 3 tries\n" + self._log_tail()
                        ) from None
        except BaseException:
            self.stop()
            raise
        return self.dsn

    def _end(self, process: subprocess.Popen[bytes]) -> None:
        """Stop the server at once (``pg_ctl stop -m immediate``)."""
        self._stop_server(process)

    # --- steps ------------------------------------------------------------------------------

    @staticmethod
    def _run_as() -> pwd.struct_passwd | None:
        """The OS user to run PostgreSQL as; None to run as ourselves (not root)."""
        if os.geteuid() != 0:
            return None
        for name in _UNPRIVILEGED_USERS:
            try:
                return pwd.getpwnam(name)
            except KeyError:
                continue
        raise ClusterError(
            f"running as root and none of the users {_UNPRIVILEGED_USERS} exists to run "
            "PostgreSQL as (it refuses to run as root)"
        )

    def _make_directory(self) -> Path:
        parent = Path(tempfile.gettempdir())
        if self._user is not None and not _world_traversable(parent):
            parent = Path("/tmp")  # e.g. TMPDIR under /root, which the server user cannot enter
        directory = Path(tempfile.mkdtemp(prefix="alkstore-pg-", dir=parent))
        (directory / "socket").mkdir()
        if self._user is not None:
            for path in (directory, directory / "socket"):
                os.chown(path, self._user.pw_uid, self._user.pw_gid)
        return directory

    def _run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self._env(),
            cwd=self.directory,
            user=self._uid(),
            group=self._gid(),
            extra_groups=self._extra_groups(),
        )

    def _initdb(self) -> None:
        assert self.directory is not None
        result = self._run(
            [
                str(self.bindir / "initdb"),
                "--pgdata",
                str(self.directory / "data"),
                "--username",
                "postgres",
                "--auth",
                "trust",
                "--encoding",
                "UTF8",
                "--locale",
                "C",
                "--no-sync",
            ],
            timeout=120,
        )
        if result.returncode != 0:
            raise ClusterError(
                f"initdb failed ({result.returncode}):\n{result.stdout}{result.stderr}"
            )

    def restart_immediate(self) -> None:
        """Stop the server at once (``pg_ctl stop -m immediate``: to its clients, a crash)
        and start it again on the same port; returns once it accepts connections."""
        process, port = self._process, self.port
        if process is None or port is None:
            raise ClusterError("the cluster is not running")
        self._stop_server(process)
        self._start_server(port)

    def _start_server(self, port: int | None = None) -> None:
        assert self.directory is not None
        port = port or _free_port()
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(port),
            "unix_socket_directories": str(self.directory / "socket"),
            "max_connections": str(self.max_connections),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            **self.settings,
        }
        args = [str(self.bindir / "postgres"), "-D", str(self.directory / "data")]
        for name, value in settings.items():
            args += ["-c", f"{name}={value}"]
        with open(self.log_path, "wb") as log:  # a fresh log for each attempt
            if self._user is not None:
                os.chown(self.log_path, self._user.pw_uid, self._user.pw_gid)
            self._process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                cwd=self.directory,
                user=self._uid(),
                group=self._gid(),
                extra_groups=self._extra_groups(),
            )
        self.port = port
        self._wait_ready(self._process, port)

    def _wait_ready(self, process: subprocess.Popen[bytes], port: int) -> None:
        deadline = time.monotonic() + self.start_timeout
        pg_isready = self.bindir / "pg_isready"
        while True:
            code = process.poll()
            if code is not None:
                self._process = None
                self.port = None
                tail = self._log_tail()
                if "could not bind" in tail or "already in use" in tail:
                    raise _PortTaken()
                raise ClusterError(f"postgres exited with status {code} on start:\n{tail}")
            if self._accepting(pg_isready, port):
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"postgres did not accept connections within {self.start_timeout:g}s:\n"
                    + self._log_tail()
                )
            time.sleep(0.05)  # polling interval, not a stand-in for readiness

    def _accepting(self, pg_isready: Path, port: int) -> bool:
        if pg_isready.is_file():
            result = subprocess.run(
                [
                    str(pg_isready),
                    "-q",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-U",
                    "postgres",
                    "-d",
                    "postgres",
                    "-t",
                    "2",
                ],
                env=self._env(),
                capture_output=True,
                timeout=30,
            )
            return result.returncode == 0
        # No pg_isready: the postmaster writes "ready" into postmaster.pid when it accepts
        # connections (what pg_ctl -w waits for).
        assert self.directory is not None
        try:
            lines = (self.directory / "data" / "postmaster.pid").read_text().splitlines()
        except OSError:
            return False
        return len(lines) >= 8 and lines[7].strip() == "ready"

    def _stop_server(self, process: subprocess.Popen[bytes]) -> None:
        assert self.directory is not None
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            self._run(
                [
                    str(self.bindir / "pg_ctl"),
                    "stop",
                    "--pgdata",
                    str(self.directory / "data"),
                    "--mode",
                    "immediate",
                    "--wait",
                    "--timeout",
                    "30",
                ],
                timeout=60,
            )
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # pg_ctl could not stop it: SIGQUIT is an immediate shutdown, SIGKILL the last word.
            for sig in (signal.SIGQUIT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(sig)
                try:
                    process.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    continue

    # --- helpers ----------------------------------------------------------------------------

    # Popen drops privileges itself (setgroups, setgid, setuid) between fork and exec.

    def _uid(self) -> int | None:
        return None if self._user is None else self._user.pw_uid

    def _gid(self) -> int | None:
        return None if self._user is None else self._user.pw_gid

    def _extra_groups(self) -> list[int] | None:
        return None if self._user is None else []

    def _env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        env["LC_ALL"] = "C"
        if self._user is not None:
            env["HOME"] = str(self.directory)
            env["USER"] = env["LOGNAME"] = self._user.pw_name
        return env

    def _log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except (OSError, ClusterError):
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])


class _PortTaken(Exception):
    """The port chosen was taken before the server could bind it; try another."""


@contextlib.contextmanager
def locked_file(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created when missing): one installer at a
    time across the processes of a test run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


__all__ = ["ClusterError", "TempCluster", "find_bindir", "locked_file"]
