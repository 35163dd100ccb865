"""What the framework recipe tests share: a web server (uvicorn, Django's runserver) started
as a real process on a local port, its output collected, and HTTP polled until it answers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
"""The repository's examples/ directory."""
START_SECONDS = 60.0
"""How long a server may take to answer its first request (a loaded, shared machine)."""


def free_port() -> int:
    """A local TCP port nobody listens on now (the server binds it right after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Process:
    """A child process whose stdout and stderr are read into :attr:`output` as it runs (a
    thread drains the pipe, so a chatty child never blocks on a full one)."""

    def __init__(self, command: Sequence[str], *, env: dict[str, str], cwd: Path) -> None:
        self.popen = subprocess.Popen(
            list(command),
            env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        """Everything the process printed so far."""
        return "".join(self.lines)

    def wait_for(self, check: Callable[[], bool], what: str, timeout: float) -> None:
        """Poll ``check`` until it holds; fail naming ``what`` (with the output) after
        ``timeout`` seconds or when the process exits first."""
        deadline = time.monotonic() + timeout
        while not check():
            assert self.popen.poll() is None, f"exited before {what}:\n{self.output}"
            assert time.monotonic() < deadline, f"no {what} in {timeout} s:\n{self.output}"
            time.sleep(0.05)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``sig`` and wait for the exit status (kill after ``timeout`` seconds)."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout)
            raise
        finally:
            self._reader.join(timeout)


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=5)
    except httpx.TransportError:
        return False
    return True


@contextmanager
def serving(
    command: Sequence[str], *, url: str, env: dict[str, str], cwd: Path
) -> Iterator[Process]:
    """Run a server ``command`` until the block ends; yields once ``url`` answers HTTP (any
    status), then stops it with SIGTERM."""
    process = Process(command, env=env, cwd=cwd)
    try:
        process.wait_for(lambda: _answers(url), f"answer at {url}", START_SECONDS)
        yield process
    finally:
        process.stop()
