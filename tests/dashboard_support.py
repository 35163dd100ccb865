"""What the dashboard tests share: the dashboard served by uvicorn in a thread, seeded jobs,
and Debian's chromium (installed with apt-get under a file lock when missing)."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import uvicorn

import alkstore
from alkstore.conformance.packages import ensure_program
from alkstore.dashboard import DashboardSettings, create_app

CHROMIUM = Path("/usr/bin/chromium")
SCRIPT_DATA = {
    "html": "<script>window.__pwned = 1; alert('xss')</script><img src=x onerror=alert(2)>"
}


def find_chromium() -> Path:
    """Debian's chromium, installed with apt-get first when missing (needs root); raises
    :class:`~alkstore.conformance.packages.PackageUnavailable` with the reason otherwise."""
    return ensure_program(
        "chromium", lambda: CHROMIUM if CHROMIUM.is_file() else None, recommends=True
    )


@contextmanager
def serve(settings: DashboardSettings) -> Iterator[str]:
    """The dashboard of ``settings`` served on a free local port; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the dashboard did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


@attrs.frozen
class Seeded:
    """The ids of the jobs :func:`seed` made."""

    queued: uuid.UUID
    script: uuid.UUID
    completed: uuid.UUID
    failed: uuid.UUID
    dead: uuid.UUID


def seed(store: alkstore.Store) -> Seeded:
    """Queues ``emails`` (dead letters to ``emails_dlq``) and ``reports`` with jobs in several
    states, a job whose data holds a script, 120 bulk jobs for paging, and a schedule."""
    store.create_queue("emails_dlq")
    store.create_queue("emails", dead_letter="emails_dlq", retry_limit=0)
    store.create_queue("reports")
    completed = store.send("emails", {"to": "ada@example.com", "subject": "welcome"})
    failed = store.send("emails", {"to": "bob@example.com", "subject": "invoice"})
    for job in store.fetch("emails", batch_size=2):
        if job.id == completed:
            store.complete("emails", [job], {"sent": True, "message_id": "m-1"})
        else:
            error = {
                "name": "SMTPError",
                "message": "550 mailbox unavailable",
                "stack": 'Traceback (most recent call last):\n  File "send.py", line 12\n'
                "SMTPError: 550 mailbox unavailable\n",
            }
            store.fail("emails", [job], error)
    queued = store.send("emails", {"to": "cy@example.com", "subject": "reminder"})
    script = store.send("emails", SCRIPT_DATA)
    store.send_many("reports", [{"data": {"report": n}} for n in range(120)])
    dead = store.list_jobs("emails_dlq")[0].id
    store.schedule("reports", "0 3 * * *", {"report": "nightly"})
    return Seeded(queued=queued, script=script, completed=completed, failed=failed, dead=dead)
