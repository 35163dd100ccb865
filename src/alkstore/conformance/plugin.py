"""The conformance pytest plugin: options, the ``alkstore_store`` fixture, capability markers.

It is opt-in, so installing alkstore changes nothing in anyone else's pytest run: enable it
with ``pytest -p alkstore.conformance`` (or ``-p alkstore.conformance.plugin``) or with
``pytest_plugins = ["alkstore.conformance.plugin"]`` in a top-level ``conftest.py``. Every
fixture it provides is prefixed ``alkstore_``.

Options (also settable through ``ALKSTORE_DSN`` / ``ALKSTORE_ENGINE`` / ``ALKSTORE_DRIVER``):

- ``--alkstore-dsn``: the database to test; without it a throwaway PostgreSQL cluster is
  started for the run (and removed afterwards).
- ``--alkstore-engine``: the engine name (default ``postgres``).
- ``--alkstore-driver``: ``psycopg``, ``psycopg-async``, ``asyncpg``, ``pg8000`` (or any
  driver registered under the ``alkstore.drivers`` entry points), a comma list of them, or
  ``all`` (the default: every driver whose client library is installed): every test runs
  once per driver.
- ``--alkstore-pg-version N`` (``ALKSTORE_PG_VERSION``): the throwaway cluster runs
  PostgreSQL ``N`` (14 to 18), installed into the cache first when the system lacks it (see
  :mod:`.servers`). Where it cannot be had, every test is skipped with the reason.
- ``--alkstore-pgbouncer`` (``ALKSTORE_PGBOUNCER=1``): stores connect with
  ``pooler="pgbouncer"``; without ``--alkstore-dsn`` a PgBouncer in transaction pooling mode
  is started in front of the throwaway cluster (with ``--alkstore-dsn``, that DSN is taken
  to be such a PgBouncer).

Each test gets a store on a schema of its own, installed or reset to its just-installed
state by the test before it (see :func:`.harness.open_handle`). Tests declare what they
need with ``@pytest.mark.requires("capability", ...)``; where the engine lacks it the test is
skipped with the capability and the reason its engine description gives.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from .harness import (
    MEMORY_ENGINE,
    MEMORY_VARIANTS,
    Backend,
    StoreHandle,
    driver_variants,
    drop_spare_schemas,
    installed_variants,
    open_handle,
    skip_reason,
)
from .pgbouncer import PgBouncerUnavailable
from .servers import ServerUnavailable, start_throwaway

_backend_key = pytest.StashKey[Backend]()

MATRIX_PROFILE = "alkstore-matrix"
"""The hypothesis profile of runs that repeat the suite over many servers and drivers
(``--hypothesis-profile alkstore-matrix``): each property test of the suite runs at most
:data:`MATRIX_EXAMPLES` examples instead of its full count (docs/conformance.md)."""
MATRIX_EXAMPLES = 8

# Registered on import so that ``--hypothesis-profile`` finds it when pytest configures.
settings.register_profile(MATRIX_PROFILE, max_examples=MATRIX_EXAMPLES)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the ``--alkstore-*`` options."""
    group = parser.getgroup("alkstore", "alkstore conformance")
    group.addoption("--alkstore-dsn", default=os.environ.get("ALKSTORE_DSN"))
    group.addoption("--alkstore-engine", default=os.environ.get("ALKSTORE_ENGINE", "postgres"))
    group.addoption(
        "--alkstore-emulate",
        action="store_true",
        default=os.environ.get("ALKSTORE_EMULATE") == "1",
        help="run a distributed engine on stock PostgreSQL behind its emulation guard",
    )
    group.addoption(
        "--alkstore-pg-version",
        type=int,
        default=int(os.environ["ALKSTORE_PG_VERSION"])
        if os.environ.get("ALKSTORE_PG_VERSION")
        else None,
        help="major version of the throwaway PostgreSQL (installed into the cache if needed)",
    )
    group.addoption(
        "--alkstore-pgbouncer",
        action="store_true",
        default=os.environ.get("ALKSTORE_PGBOUNCER") == "1",
        help="connect through PgBouncer in transaction pooling mode (started in front of "
        "the throwaway cluster unless --alkstore-dsn is given)",
    )
    group.addoption(
        "--alkstore-driver",
        default=os.environ.get("ALKSTORE_DRIVER", "all"),
        help=f"one of {', '.join(driver_variants())}, a comma list, or all (the installed ones)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Declare the markers."""
    config.addinivalue_line(
        "markers", "requires(*capabilities): skip unless the engine has these capabilities"
    )
    config.addinivalue_line("markers", "conformance: a test of the shared contract suite")


def _drivers(config: pytest.Config) -> list[str]:
    raw = str(config.getoption("--alkstore-driver"))
    known = driver_variants()
    if config.getoption("--alkstore-engine") == MEMORY_ENGINE:
        raw, known = raw.replace("all", ",".join(MEMORY_VARIANTS)), list(MEMORY_VARIANTS)
    if raw == "all":
        return installed_variants()
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise pytest.UsageError(f"--alkstore-driver: unknown {unknown}; choose from {known}")
    return names


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses ``alkstore_store`` once per selected driver."""
    if "alkstore_store" in metafunc.fixturenames:
        metafunc.parametrize("alkstore_driver", _drivers(metafunc.config), scope="session")


@pytest.fixture(scope="session")
def alkstore_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The database under test: the given DSN, or a throwaway cluster started now."""
    config = request.config
    dsn = config.getoption("--alkstore-dsn")
    engine = str(config.getoption("--alkstore-engine"))
    emulate = bool(config.getoption("--alkstore-emulate"))
    major = config.getoption("--alkstore-pg-version")
    pgbouncer = bool(config.getoption("--alkstore-pgbouncer"))
    options = {"pooler": "pgbouncer"} if pgbouncer else {}
    if dsn or (major is None and not pgbouncer):
        backend = Backend.start(dsn=dsn, engine=engine, emulate=emulate)
        backend.options.update(options)
    else:
        try:
            server = start_throwaway(major, pgbouncer=pgbouncer)
        except (ServerUnavailable, PgBouncerUnavailable) as exc:
            pytest.skip(f"server unavailable: {exc}")
        if pgbouncer:
            # Workers LISTEN straight to the server, as docs/workers.md tells users to.
            options["listen_dsn"] = server.server_dsn
        backend = Backend(server.dsn, engine, emulate, server.stop, options)
    try:
        yield backend
    finally:
        try:
            drop_spare_schemas(backend, _drivers(config)[0])
        finally:
            backend.stop()


@pytest.fixture
def alkstore_store(
    alkstore_backend: Backend, alkstore_driver: str, request: pytest.FixtureRequest
) -> Iterator[StoreHandle]:
    """A store on a schema of its own (just installed, or reset by the test before), through
    the driver under test (sync view of async ones)."""
    handle = open_handle(alkstore_backend, alkstore_driver)
    try:
        marker = request.node.get_closest_marker("requires")
        if marker is not None:
            # The effective capabilities: a gap the server does not have is closed.
            reason = skip_reason(
                alkstore_backend.engine_name, marker.args, handle.engine.capabilities
            )
            if reason:
                pytest.skip(reason)
        yield handle
    finally:
        handle.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On the in-memory engine, skip what it cannot do, with the reason
    (:mod:`.memory_skips`)."""
    if config.getoption("--alkstore-engine") == MEMORY_ENGINE:
        from .memory_skips import skip_reason_on_memory

        for item in items:
            reason = skip_reason_on_memory(item.nodeid)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=f"memory: {reason}"))


def _server_label(config: pytest.Config) -> str:
    major = config.getoption("--alkstore-pg-version")
    label = "PostgreSQL" + (f" {major}" if major is not None else "")
    return label + (" behind PgBouncer" if config.getoption("--alkstore-pgbouncer") else "")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Say what the suite runs against."""
    dsn: Any = config.getoption("--alkstore-dsn") or "(throwaway cluster)"
    return [
        f"alkstore: engine={config.getoption('--alkstore-engine')} "
        f"emulate={config.getoption('--alkstore-emulate')} "
        f"drivers={','.join(_drivers(config))} server={_server_label(config)} dsn={dsn}"
    ]
