"""LISTEN/NOTIFY listeners of the drivers, against the run's real PostgreSQL server."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Coroutine
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore.core.identifiers import quote_ident
from alkstore.drivers import async_driver, sync_driver, variant
from alkstore.drivers.base import AsyncListener, DriverSettings, Notification, SyncListener

LISTENING = ["psycopg", "psycopg-async", "asyncpg"]
"""Driver variants with listeners (pg8000 refuses; see its own test)."""


def run(coro: Coroutine[Any, Any, None]) -> None:
    """Run one scenario, with a deadline so a hang fails instead of stalls."""

    async def bounded() -> None:
        async with asyncio.timeout(60):
            await coro

    asyncio.run(bounded())


class Listener:
    """A sync or async listener behind async methods (a sync one blocks the loop: fine here)."""

    def __init__(self, native: SyncListener | AsyncListener) -> None:
        self.native = native

    @classmethod
    async def open(cls, name: str, dsn: str, application_name: str = "alkstore") -> Listener:
        settings = DriverSettings(application_name=application_name)
        if variant(name).is_async:
            driver = async_driver(variant(name).name)
            return cls(await driver.open_listener(dsn, settings))
        return cls(sync_driver(name).open_listener(dsn, settings))

    async def _call(self, method: str, *args: Any) -> Any:
        result = getattr(self.native, method)(*args)
        return await result if asyncio.iscoroutine(result) else result

    async def listen(self, channel: str) -> None:
        await self._call("listen", channel)

    async def wait(self, timeout: float) -> list[Notification]:
        return await self._call("wait", timeout)  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self._call("close")


def notify(dsn: str, channel: str, payload: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


@pytest.mark.parametrize("name", LISTENING)
def test_a_notify_from_another_connection_wakes_wait(name, pg_dsn):
    async def scenario() -> None:
        listener = await Listener.open(name, pg_dsn)
        try:
            await listener.listen("alk_wake")
            await listener.listen("alk_other")
            sender = threading.Thread(target=notify, args=(pg_dsn, "alk_wake", "héllo, 'x' {}"))
            started = time.monotonic()
            sender.start()
            got = await listener.wait(30)
            assert got == [Notification("alk_wake", "héllo, 'x' {}")]
            assert time.monotonic() - started < 20  # woken by the notify, not the deadline
            sender.join()
            notify(pg_dsn, "alk_unheard", "no")  # a channel nobody listens on
            notify(pg_dsn, "alk_other", "1")
            notify(pg_dsn, "alk_other", "2")
            received: list[Notification] = []
            deadline = time.monotonic() + 20
            while len(received) < 2 and time.monotonic() < deadline:
                received += await listener.wait(1)
            assert received == [Notification("alk_other", "1"), Notification("alk_other", "2")]
        finally:
            await listener.close()

    run(scenario())


@pytest.mark.parametrize("name", LISTENING)
def test_wait_returns_nothing_after_its_timeout(name, pg_dsn):
    async def scenario() -> None:
        listener = await Listener.open(name, pg_dsn)
        try:
            await listener.listen("alk_quiet")
            assert await listener.wait(0) == []
            started = time.monotonic()
            assert await listener.wait(0.3) == []
            assert 0.2 <= time.monotonic() - started < 10
        finally:
            await listener.close()

    run(scenario())


@pytest.mark.parametrize("name", LISTENING)
def test_close_is_idempotent_and_a_closed_listener_refuses_to_wait(name, pg_dsn):
    async def scenario() -> None:
        listener = await Listener.open(name, pg_dsn)
        await listener.listen("alk_close")
        await listener.close()
        await listener.close()
        with pytest.raises(alkstore.ListenerClosed):
            await listener.wait(1)
        with pytest.raises(alkstore.ListenerClosed):
            await listener.listen("alk_close")

    run(scenario())


@pytest.mark.parametrize("name", LISTENING)
def test_a_terminated_backend_makes_wait_raise_within_its_timeout(name, pg_dsn):
    app = f"alk_listener_{uuid.uuid4().hex[:12]}"

    async def scenario() -> None:
        listener = await Listener.open(name, pg_dsn, application_name=app)
        try:
            await listener.listen("alk_lost")
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                cur = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    (app,),
                )
                assert cur.fetchall() == [(True,)]
            started = time.monotonic()
            with pytest.raises(alkstore.ListenerClosed):
                await listener.wait(5)
            assert time.monotonic() - started < 5 + 5  # within its timeout, and then some
            with pytest.raises(alkstore.ListenerClosed):
                await listener.wait(0)  # and stays closed
        finally:
            await listener.close()

    run(scenario())


@pytest.mark.parametrize("name", LISTENING)
def test_bad_channels_and_timeouts_are_refused_by_name(name, pg_dsn):
    async def scenario() -> None:
        listener = await Listener.open(name, pg_dsn)
        try:
            for channel in ('x"; DROP TABLE t; --', "Upper", "", "a" * 64):
                with pytest.raises(alkstore.InvalidOptions) as err:
                    await listener.listen(channel)
                assert err.value.field == "channel"
            for timeout in (-1, float("nan"), float("inf"), "1", True):
                with pytest.raises(alkstore.InvalidOptions) as err:
                    await listener.wait(timeout)  # type: ignore[arg-type]
                assert err.value.field == "timeout"
            await listener.listen("alk_still_usable")
            assert await listener.wait(0) == []
        finally:
            await listener.close()

    run(scenario())


def test_pg8000_refuses_to_open_a_listener(pg_dsn):
    with pytest.raises(alkstore.UnsupportedByDriver, match=r"pg8000.*LISTEN/NOTIFY"):
        sync_driver("pg8000").open_listener(pg_dsn, DriverSettings())


def test_quote_ident_quotes_safe_names_and_refuses_the_rest():
    assert quote_ident("alk_jobs_1") == '"alk_jobs_1"'
    for bad in ('a"b', "A", "1a", "a-b", "a b", "é", "a" * 64, ""):
        with pytest.raises(alkstore.InvalidOptions):
            quote_ident(bad)
