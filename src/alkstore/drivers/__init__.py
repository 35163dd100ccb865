"""Drivers adapt one client library each to the session protocols in :mod:`.base`."""

from __future__ import annotations

import importlib

from .base import AsyncDriver, SyncDriver

_SYNC = {"psycopg": "alkstore.drivers.psycopg:SYNC", "pg8000": "alkstore.drivers.pg8000:SYNC"}
_ASYNC = {"psycopg": "alkstore.drivers.psycopg:ASYNC", "asyncpg": "alkstore.drivers.asyncpg:ASYNC"}

SYNC_DRIVERS = tuple(_SYNC)
"""Names of the drivers a sync :class:`~alkstore.Store` can use."""
ASYNC_DRIVERS = tuple(_ASYNC)
"""Names of the drivers an :class:`~alkstore.AsyncStore` can use."""


def _load(spec: str) -> object:
    module, attr = spec.split(":")
    return getattr(importlib.import_module(module), attr)


def sync_driver(name: str) -> SyncDriver:
    """The sync driver called ``name`` (its client library is imported now)."""
    from ..core.errors import InvalidOptions

    if name not in _SYNC:
        raise InvalidOptions("driver", name, f"sync drivers are {', '.join(_SYNC)}")
    driver = _load(_SYNC[name])
    assert isinstance(driver, SyncDriver)
    return driver


def async_driver(name: str) -> AsyncDriver:
    """The async driver called ``name`` (its client library is imported now)."""
    from ..core.errors import InvalidOptions

    if name not in _ASYNC:
        raise InvalidOptions("driver", name, f"async drivers are {', '.join(_ASYNC)}")
    driver = _load(_ASYNC[name])
    assert isinstance(driver, AsyncDriver)
    return driver
