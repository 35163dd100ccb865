"""Client-side deadlines for drivers that block on a socket: :data:`WATCHDOG`.

``statement_timeout`` ends a statement the server is running, but not a call whose network
stalled (a dead peer, a partition, a proxy that stopped forwarding): the client then waits
for an answer that never comes, and TCP keepalives do not help while a middlebox still
acknowledges. So a driver arms a deadline around each statement: one daemon thread shuts the
connection's socket down when a deadline passes, which ends the blocked read at once (the
client library sees the connection close); the driver then raises
:class:`~alkstore.DeadlineExceeded` and discards the connection.

Arming costs a lock and a dict entry; the thread is woken only when a deadline earlier than
the one it sleeps towards is armed, which with one timeout per store is almost never.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class Armed:
    """One armed deadline; :attr:`fired` tells whether it passed and cut the connection."""

    __slots__ = ("deadline", "fd", "fired")

    def __init__(self, deadline: float, fd: int) -> None:
        self.deadline = deadline
        self.fd = fd
        self.fired = False


class Watchdog:
    """Shuts down the socket of every armed statement whose deadline passed."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: set[Armed] = set()
        self._wake_at = float("inf")
        self._thread: threading.Thread | None = None

    def arm(self, fd: int, seconds: float) -> Armed:
        """Cut the connection on socket ``fd`` once ``seconds`` have passed, unless
        :meth:`disarm` comes first. (A pair of calls rather than only a context manager: a
        driver arms one around every statement, and a generator context manager was a
        visible part of a one-job fetch's client time.)"""
        armed = Armed(time.monotonic() + seconds, fd)
        with self._cond:
            self._armed.add(armed)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="alkstore-deadlines", daemon=True
                )
                self._thread.start()
            if armed.deadline < self._wake_at:
                self._cond.notify()
        return armed

    def disarm(self, armed: Armed) -> None:
        """The statement ended: its connection is no longer cut (:attr:`Armed.fired` tells
        whether it was)."""
        with self._cond:
            self._armed.discard(armed)

    @contextmanager
    def guard(self, fd: int, seconds: float | None) -> Iterator[Armed]:
        """:meth:`arm` for the block (never when ``seconds`` is None); the :class:`Armed`
        says afterwards whether it fired."""
        if seconds is None:
            yield Armed(0.0, fd)
            return
        armed = self.arm(fd, seconds)
        try:
            yield armed
        finally:
            self.disarm(armed)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for armed in list(self._armed):
                    if armed.deadline <= now:
                        # Under the lock: the statement's thread cannot have disarmed, so
                        # the descriptor is still its connection's.
                        self._armed.discard(armed)
                        armed.fired = True
                        _cut(armed.fd)
                self._wake_at = min((a.deadline for a in self._armed), default=now + 60)
                self._cond.wait(max(0.0, self._wake_at - now))


def _cut(fd: int) -> None:
    with suppress(OSError):  # already closed: nothing to cut
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


WATCHDOG = Watchdog()
"""The process's one watchdog (a thread started on first use)."""

__all__ = ["WATCHDOG", "Armed", "Watchdog"]
