"""A throwaway PgBouncer in transaction pooling mode: :class:`TempPgBouncer`.

It listens on a free loopback port and forwards every database to one PostgreSQL server
(trust authentication, user ``postgres``, as :class:`~.cluster.TempCluster` sets it up), in
``pool_mode = transaction``: a client holds a server connection only for the length of a
transaction, so session state (``SET``, prepared statements, ``LISTEN``) does not follow it.
The pool is kept smaller than the number of clients a test run opens, so that clients
really do share server connections.

The ``pgbouncer`` program is found on ``PATH`` or in ``/usr/sbin``; when missing, run as root
on Debian or Ubuntu, :func:`find_pgbouncer` installs the ``pgbouncer`` package with apt-get
(once: it stays installed). Otherwise it raises :class:`PgBouncerUnavailable` with the reason.
Like PostgreSQL, PgBouncer refuses to run as root: a root run starts it as the cluster's
unprivileged user.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from .cluster import ClusterError, TempCluster, ThrowawayProcess, _free_port
from .packages import PackageUnavailable, ensure_program

POOL_SIZE = 8
"""Server connections per database and user: fewer than a test run's clients."""


class PgBouncerUnavailable(PackageUnavailable):
    """PgBouncer is not installed and cannot be installed here."""


def find_pgbouncer(*, install: bool = True) -> Path:
    """The ``pgbouncer`` program; installed with apt-get first when missing and ``install``."""
    try:
        return ensure_program("pgbouncer", _installed, install=install)
    except PackageUnavailable as exc:
        raise PgBouncerUnavailable(str(exc)) from exc


def _installed() -> Path | None:
    for candidate in (shutil.which("pgbouncer"), "/usr/sbin/pgbouncer"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


class TempPgBouncer(ThrowawayProcess):
    """PgBouncer in transaction pooling mode in front of the server at ``upstream``.

    ``start()`` returns the DSN of the same database through PgBouncer; ``stop()`` stops it
    and deletes its directory. As a context manager it starts on entry and stops on exit.
    """

    def __init__(
        self,
        upstream: str,
        *,
        program: Path | str | None = None,
        pool_size: int = POOL_SIZE,
        start_timeout: float = 30.0,
    ) -> None:
        self.upstream = upstream
        """The DSN of the server PgBouncer forwards to."""
        self.program = Path(program) if program is not None else find_pgbouncer()
        self.pool_size = pool_size
        self.start_timeout = start_timeout
        self.port: int | None = None
        self.directory: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._user = TempCluster._run_as()

    @property
    def dsn(self) -> str:
        """The DSN of the upstream database through PgBouncer."""
        if self.port is None:
            raise ClusterError("PgBouncer is not running")
        path = urlsplit(self.upstream).path or "/postgres"
        return f"postgresql://postgres@127.0.0.1:{self.port}{path}"

    def start(self) -> str:
        """Write the configuration, start PgBouncer, wait until it answers; the DSN."""
        if self._process is not None:
            return self.dsn
        self.directory = Path(tempfile.mkdtemp(prefix="alkstore-pgbouncer-", dir="/tmp"))
        atexit.register(self.stop)
        try:
            for attempt in range(3):
                if self._start_once():
                    break
                if attempt == 2:
                    raise ClusterError("PgBouncer: no free port after 3 tries\n" + self._log())
        except BaseException:
            self.stop()
            raise
        return self.dsn

    def _end(self, process: subprocess.Popen[bytes]) -> None:
        """Stop PgBouncer at once (SIGINT, then SIGKILL if it lingers)."""
        if process.poll() is not None:
            return
        for sig in (signal.SIGINT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            try:
                process.wait(timeout=10)
                return
            except subprocess.TimeoutExpired:
                continue

    def _config(self, port: int) -> str:
        assert self.directory is not None
        up = urlsplit(self.upstream)
        return "\n".join(
            [
                "[databases]",
                f"* = host={up.hostname or '127.0.0.1'} port={up.port or 5432}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {self.directory / 'users.txt'}",
                "pool_mode = transaction",
                f"default_pool_size = {self.pool_size}",
                "max_client_conn = 1000",
                # pg8000 and others send it at startup; PgBouncer would refuse the client.
                "ignore_startup_parameters = extra_float_digits",
                f"logfile = {self.directory / 'pgbouncer.log'}",
                f"pidfile = {self.directory / 'pgbouncer.pid'}",
                "",
            ]
        )

    def _start_once(self) -> bool:
        """Start on a free port; False when the port was taken meanwhile."""
        assert self.directory is not None
        port = _free_port()
        (self.directory / "users.txt").write_text('"postgres" ""\n')
        ini = self.directory / "pgbouncer.ini"
        ini.write_text(self._config(port))
        log = self.directory / "pgbouncer.log"
        log.write_text("")
        if self._user is not None:
            for path in (self.directory, ini, log, self.directory / "users.txt"):
                os.chown(path, self._user.pw_uid, self._user.pw_gid)
        self._process = subprocess.Popen(
            [str(self.program), str(ini)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.directory,
            user=None if self._user is None else self._user.pw_uid,
            group=None if self._user is None else self._user.pw_gid,
            extra_groups=None if self._user is None else [],
        )
        deadline = time.monotonic() + self.start_timeout
        while True:
            code = self._process.poll()
            if code is not None:
                self._process = None
                text = self._log()
                if "Address already in use" in text:
                    return False
                raise ClusterError(f"pgbouncer exited with status {code} on start:\n{text}")
            if _answers(port):
                self.port = port
                return True
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"pgbouncer did not listen within {self.start_timeout:g}s:\n{self._log()}"
                )
            time.sleep(0.05)  # polling interval, not a stand-in for readiness

    def _log(self) -> str:
        if self.directory is None:
            return "(no log)"
        try:
            return "\n".join((self.directory / "pgbouncer.log").read_text().splitlines()[-30:])
        except OSError:
            return "(no log)"


def _answers(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


__all__ = ["PgBouncerUnavailable", "TempPgBouncer", "find_pgbouncer"]
