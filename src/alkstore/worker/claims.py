"""The fetcher's own connection (:meth:`~.core.WorkerCore._claims_at`), held while it runs.

Held, not borrowed per claim: a pool's borrow and return cost round trips of their own
(asyncpg resets a returned connection), and a claim prepared once stays prepared. A claim
that fails gives the connection back (the pool drops a broken one) and the next claim
borrows a fresh one. A claim that needs a transaction (the keyed claim under the queue row's
lock) gets one, and a claim that lost a key to a concurrent claim runs again
(:func:`~alkstore.runner.run_held`).
"""

from __future__ import annotations

import contextlib
from typing import TypeVar

from ..core.plans import Plan
from ..drivers.base import (
    AsyncDriver,
    AsyncSession,
    AsyncSource,
    SyncDriver,
    SyncSession,
    SyncSource,
)
from ..runner import run_held, run_held_async

T = TypeVar("T")


class Claims:
    """Runs the fetcher's claims on one held session of ``source`` (closed by :meth:`close`)."""

    def __init__(self, source: SyncSource, driver: SyncDriver) -> None:
        self._source = source
        self._driver = driver
        self._held: contextlib.ExitStack | None = None
        self._session: SyncSession | None = None

    def run(self, plan: Plan[T]) -> T:
        """Run ``plan`` on the held session (borrowed first when none is held)."""
        if self._session is None:
            held = contextlib.ExitStack()
            self._session = held.enter_context(self._source.session())
            self._held = held
        try:
            return run_held(self._session, self._driver, plan)
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        held, self._held, self._session = self._held, None, None
        if held is not None:
            with contextlib.suppress(Exception):
                held.close()

    def close(self) -> None:
        """Give the session back and close the source."""
        self._release()
        self._source.close()


class AsyncClaims:
    """:class:`Claims` for an async driver."""

    def __init__(self, source: AsyncSource, driver: AsyncDriver) -> None:
        self._source = source
        self._driver = driver
        self._held: contextlib.AsyncExitStack | None = None
        self._session: AsyncSession | None = None

    async def run(self, plan: Plan[T]) -> T:
        """See :meth:`Claims.run`."""
        if self._session is None:
            held = contextlib.AsyncExitStack()
            self._session = await held.enter_async_context(self._source.session())
            self._held = held
        try:
            return await run_held_async(self._session, self._driver, plan)
        except BaseException:
            await self._release()
            raise

    async def _release(self) -> None:
        held, self._held, self._session = self._held, None, None
        if held is not None:
            with contextlib.suppress(Exception):
                await held.aclose()

    async def close(self) -> None:
        """See :meth:`Claims.close`."""
        await self._release()
        await self._source.close()


__all__ = ["AsyncClaims", "Claims"]
