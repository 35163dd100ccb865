"""The database ``alkstore conformance --dsn`` names: its DSN as shown, and whether it answers."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from ...conformance.matrix import (
    one_line,
)


def redact(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***``."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def probe(dsn: str) -> tuple[str | None, str | None]:
    """``(why the server at dsn cannot be queried, the engine it looks like)``.

    Only ``postgres://`` and ``postgresql://`` URIs are checked (a ``pglite://`` database is
    started by each test itself: ``(None, "pglite")``), through the first sync driver that is
    installed. The engine comes from the same detection as ``connect(engine="auto")``.
    """
    if urlsplit(dsn).scheme not in ("postgres", "postgresql"):
        return None, "pglite"
    from ...core.errors import DriverUnavailable
    from ...drivers import names, sync_driver
    from ...drivers.base import DriverSettings
    from ...engines.detect import detect_plan, engine_for
    from ...runner import run_sync

    for name in names(is_async=False):
        try:
            driver = sync_driver(name)
        except DriverUnavailable:
            continue
        try:
            source = driver.open(dsn, DriverSettings(pool_size=1, connect_timeout=10))
            try:
                detected = engine_for(run_sync(source, driver, detect_plan()))
            finally:
                source.close()
        except Exception as exc:
            return one_line(f"{type(exc).__name__}: {exc}"), None
        return None, detected
    return None, None


def unreachable(dsn: str) -> str | None:
    """Why the PostgreSQL server at ``dsn`` cannot be queried; None when it answers."""
    return probe(dsn)[0]
