"""An in-process TCP proxy on the loopback that the fault suite can stall and cut."""

from __future__ import annotations

import socket
import struct
import threading
from contextlib import suppress
from types import TracebackType
from typing import Self


class FaultProxy:
    """Forwards ``127.0.0.1:port`` to an upstream server, one thread per direction.

    :meth:`stall` stops forwarding (connections stay open, bytes wait: a network that
    silently stopped); :meth:`resume` lets them flow again; :meth:`cut` resets every open
    connection (RST, as a dead peer or a firewall would); :meth:`refuse` cuts them and
    resets every new one until :meth:`admit` (a server that is down).
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self._refusing = False
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()

    def dsn(self, dsn: str) -> str:
        """``dsn`` (a URI to the upstream's port) pointed at the proxy instead."""
        return dsn.replace(f":{self.upstream[1]}/", f":{self.port}/", 1)

    def stall(self) -> None:
        """Stop forwarding bytes in both directions."""
        self._flowing.clear()

    def resume(self) -> None:
        """Forward bytes again."""
        self._flowing.set()

    def refuse(self) -> int:
        """Reset every open connection and every new one until :meth:`admit`; how many
        sockets were reset."""
        self._refusing = True
        return self.cut()

    def admit(self) -> None:
        """Forward new connections again."""
        self._refusing = False

    def cut(self) -> int:
        """Reset every open connection; how many sockets were reset."""
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _reset(sock)
        return len(sockets)

    def close(self) -> None:
        """Stop accepting, reset everything, let stalled pumps finish."""
        self._closed = True
        with suppress(OSError):
            self._listener.close()
        self.cut()
        self._flowing.set()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._refusing:
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, server))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with suppress(OSError):
                dst.shutdown(socket.SHUT_WR)


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with an RST."""
    with suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # shutdown first: close alone does not end a pump's recv blocked on it, and the
        # connection would live on, silent.
        sock.shutdown(socket.SHUT_RDWR)
    with suppress(OSError):
        sock.close()
