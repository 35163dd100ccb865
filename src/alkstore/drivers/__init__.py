"""Drivers adapt one client library each to the session protocols in :mod:`.base`.

The registry: every driver, built-in or third-party, is a :class:`~.base.DriverSpec`
registered under the ``alkstore.drivers`` entry-point group (the built-ins in alkstore's own
``pyproject.toml``). The entry point's name is the driver's *variant*: ``psycopg`` and
``psycopg-async`` are one library's sync and async faces, both called ``psycopg`` by
:func:`~alkstore.connect` and :func:`~alkstore.connect_async`.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from ..core.errors import DriverUnavailable, InvalidOptions
from .base import AsyncDriver, DriverSpec, SyncDriver
from .builtin import ORDER, SCHEMES

GROUP = "alkstore.drivers"
"""The entry-point group drivers register under."""


def registry() -> dict[str, DriverSpec]:
    """Every registered driver by variant: the built-ins first, in :data:`.builtin.ORDER`
    (psycopg, the default, leads), then third-party ones by name."""
    found: dict[str, DriverSpec] = {}
    for ep in entry_points(group=GROUP):
        spec = ep.load()
        if not isinstance(spec, DriverSpec):
            raise InvalidOptions("driver", ep.name, f"entry point {ep.value} is not a DriverSpec")
        found.setdefault(ep.name, spec)
    if not found:
        raise InvalidOptions(
            "driver", None, f"no {GROUP} entry points: alkstore's install is incomplete (reinstall)"
        )

    def rank(variant: str) -> tuple[int, str]:
        spec = found[variant]
        return (ORDER.index(spec) if spec in ORDER else len(ORDER), variant)

    order = sorted(found, key=rank)
    return {variant: found[variant] for variant in order}


def variant(name: str) -> DriverSpec:
    """The registered driver variant ``name`` (``psycopg-async``, ``asyncpg``, ...)."""
    specs = registry()
    if name not in specs:
        raise InvalidOptions("driver", name, f"known drivers are {', '.join(specs)}")
    return specs[name]


def not_installed() -> dict[str, str]:
    """Registered variants whose client library does not import, each with the command that
    installs it (importing the libraries that are installed on the way)."""
    missing: dict[str, str] = {}
    for name, spec in registry().items():
        try:
            spec.load()
        except DriverUnavailable as exc:
            missing[name] = exc.install
    return missing


def names(*, is_async: bool) -> list[str]:
    """The names a sync (or async) store accepts as ``driver``."""
    return list(dict.fromkeys(s.name for s in registry().values() if s.is_async == is_async))


def _spec(name: str, *, is_async: bool) -> DriverSpec:
    for spec in registry().values():
        if spec.name == name and spec.is_async == is_async:
            return spec
    face = "async" if is_async else "sync"
    raise InvalidOptions(
        "driver", name, f"{face} drivers are {', '.join(names(is_async=is_async))}"
    )


def sync_driver(name: str) -> SyncDriver:
    """The sync driver called ``name`` (its client library is imported now)."""
    driver = _spec(name, is_async=False).load()
    assert isinstance(driver, SyncDriver)
    return driver


def async_driver(name: str) -> AsyncDriver:
    """The async driver called ``name`` (its client library is imported now)."""
    driver = _spec(name, is_async=True).load()
    assert isinstance(driver, AsyncDriver)
    return driver


def scheme_driver(dsn: object, *, is_async: bool) -> DriverSpec | None:
    """The driver ``dsn``'s scheme calls for (``memory://``: the in-memory engine's, whose
    engine has the driver's name), or None: ``connect``'s ``driver`` option decides."""
    if not isinstance(dsn, str):
        return None
    faces = SCHEMES.get(dsn.partition(":")[0])
    if faces is None:
        return None
    return faces[1] if is_async else faces[0]


__all__ = [
    "GROUP",
    "async_driver",
    "names",
    "not_installed",
    "registry",
    "scheme_driver",
    "sync_driver",
    "variant",
]
