"""The driver registry: built-ins and third-party drivers found through entry points."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import alkstore
from alkstore.conformance.harness import StoreHandle, driver_variants
from alkstore.drivers import async_driver, names, registry, sync_driver, variant
from alkstore.drivers.base import DriverSpec

PLUGIN = textwrap.dedent(
    '''
    """A third-party driver: psycopg's sync driver under another name."""

    from alkstore.drivers.base import DriverSpec
    from alkstore.drivers.psycopg import PsycopgSyncDriver


    class EchoDriver(PsycopgSyncDriver):
        name = "echo"


    DRIVER = EchoDriver()
    SPEC = DriverSpec(
        name="echo", is_async=False, extra="echo", target="alkstore_echo:DRIVER",
        distribution="alkstore-echo",
    )
    MISSING = DriverSpec(
        name="ghost", is_async=True, extra="ghost", target="alkstore_echo_ghost:DRIVER",
        distribution="alkstore-echo",
    )
    '''
)

GHOST = "import alkstore_no_such_client_library  # noqa: F401\n"


def _install_plugin(site: Path) -> None:
    """What ``pip install`` of a driver plug-in leaves behind: its modules and entry points."""
    (site / "alkstore_echo.py").write_text(PLUGIN)
    (site / "alkstore_echo_ghost.py").write_text(GHOST)
    dist = site / "alkstore_echo-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: alkstore-echo\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(
        "[alkstore.drivers]\necho = alkstore_echo:SPEC\nghost = alkstore_echo:MISSING\n"
    )


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    _install_plugin(site)
    monkeypatch.syspath_prepend(str(site))
    yield
    for module in ("alkstore_echo", "alkstore_echo_ghost"):
        sys.modules.pop(module, None)


def test_the_built_in_drivers_are_registered_with_face_and_extra():
    specs = registry()
    assert {v: (s.name, s.is_async, s.extra) for v, s in specs.items()} == {
        "psycopg": ("psycopg", False, "psycopg"),
        "psycopg-async": ("psycopg", True, "psycopg"),
        "asyncpg": ("asyncpg", True, "asyncpg"),
        "pg8000": ("pg8000", False, "pg8000"),
    }
    assert list(specs) == ["psycopg", "psycopg-async", "asyncpg", "pg8000"]  # the default first
    assert sorted(names(is_async=False)) == ["pg8000", "psycopg"]
    assert sorted(names(is_async=True)) == ["asyncpg", "psycopg"]
    assert driver_variants() == list(specs)


def test_a_plugin_driver_is_found_and_runs_a_store(plugin, pg_dsn, schema_name):
    assert isinstance(registry()["echo"], DriverSpec)
    assert "echo" in driver_variants()
    assert "echo" in names(is_async=False)
    assert sync_driver("echo").name == "echo"
    with alkstore.connect(pg_dsn, driver="echo", schema=schema_name) as store:
        assert store.driver.name == "echo"
        store.create_queue("q")
        job_id = store.send("q", {"via": "echo"})
        assert [j.id for j in store.fetch("q")] == [job_id]


def test_the_suite_runs_a_plugin_driver_by_its_variant(plugin, alkstore_backend):
    handle = StoreHandle(alkstore_backend, "echo", "t_echo_registry")
    try:
        assert handle.is_async is False
        handle.create_queue("q")
        handle.send("q", 1)
        assert handle.job_count() == 1
    finally:
        handle.close()


def test_a_missing_client_library_names_the_extra_to_install(plugin):
    with pytest.raises(alkstore.DriverUnavailable) as err:
        async_driver("ghost")
    assert 'pip install "alkstore-echo[ghost]"' in str(err.value)
    assert isinstance(err.value, alkstore.AlkstoreError)


def test_a_missing_built_in_library_names_alkstores_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pg8000", None)  # import pg8000 now fails
    monkeypatch.delitem(sys.modules, "alkstore.drivers.pg8000", raising=False)
    with pytest.raises(alkstore.DriverUnavailable, match=r'pip install "alkstore\[pg8000\]"'):
        sync_driver("pg8000")
    with pytest.raises(alkstore.DriverUnavailable, match="pg8000"):
        alkstore.connect("postgresql://127.0.0.1:1/none", driver="pg8000")


def test_unknown_drivers_and_wrong_faces_are_refused_by_name():
    with pytest.raises(alkstore.InvalidOptions, match="asyncpg") as err:
        sync_driver("asyncpg")  # an async-only library asked for by the sync face
    assert err.value.field == "driver"
    with pytest.raises(alkstore.InvalidOptions, match="known drivers"):
        variant("nope")
