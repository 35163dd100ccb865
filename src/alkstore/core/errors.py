"""The error classes every engine and driver raises through."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .redact import redact_dsn

if TYPE_CHECKING:
    from .records import Job


class AlkstoreError(Exception):
    """Base class of every error alkstore raises itself."""


class QueueNotFound(AlkstoreError, LookupError):
    """The named queue does not exist."""

    def __init__(self, name: str, field: str = "queue") -> None:
        super().__init__(f"{field}: queue {name!r} does not exist")
        self.name = name
        self.field = field


class QueueExists(AlkstoreError):
    """A queue of that name already exists."""

    def __init__(self, name: str) -> None:
        super().__init__(f"queue {name!r} already exists")
        self.name = name


class QueueOptionsDiffer(QueueExists):
    """``create_queue(..., exist_ok=True)`` found the queue with other options.

    :attr:`differences` maps each option that differs to ``(existing, requested)``.
    """

    def __init__(self, name: str, differences: dict[str, tuple[object, object]]) -> None:
        detail = "; ".join(
            f"{field}: existing {old!r}, requested {new!r}"
            for field, (old, new) in differences.items()
        )
        AlkstoreError.__init__(self, f"queue {name!r} already exists with other options: {detail}")
        self.name = name
        self.differences = differences


class JobConflict(AlkstoreError):
    """A job with that id already exists in the queue."""


class FlowRefused(AlkstoreError):
    """A queue's policy or throttle refused a job of a flow, so none of the flow was written
    (a flow is all or nothing). ``refs`` names the refused steps."""

    def __init__(self, refs: list[str]) -> None:
        super().__init__(
            f"a queue policy or throttle refused flow step(s) {', '.join(map(repr, refs))}; "
            "nothing of the flow was written"
        )
        self.refs = refs


class InvalidOptions(AlkstoreError, ValueError):
    """An option or argument is invalid. Names the field and the value; nothing was written."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        if field == "dsn" and isinstance(value, str):
            value = redact_dsn(value)  # no password in any message
        super().__init__(f"{field}={show_value(value)}: {reason}")
        self.field = field
        self.value = value
        self.reason = reason


SHOWN_CHARS = 200
"""The longest excerpt of a value an error message shows."""


def show_value(value: object) -> str:
    """``repr(value)`` for a message: cut to :data:`SHOWN_CHARS`, and never failing (an int
    too long to print, a structure nested too deeply, a ``__repr__`` that raises)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an int of {value.bit_length()} bits>"
    if isinstance(value, str | bytes) and len(value) > SHOWN_CHARS:
        return f"{value[:SHOWN_CHARS]!r}... ({len(value)} long)"
    try:
        text = repr(value)
    except Exception as exc:  # RecursionError, ValueError, a broken __repr__
        return f"<a {type(value).__name__} that cannot be shown: {type(exc).__name__}>"
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} chars)"


class UnsupportedByEngine(AlkstoreError):
    """The chosen engine lacks a capability the call needs."""

    def __init__(self, engine: str, capability: str, what: str = "") -> None:
        detail = f" ({what})" if what else ""
        super().__init__(f"engine {engine!r} lacks capability {capability!r}{detail}")
        self.engine = engine
        self.capability = capability


class SchemaVersionError(AlkstoreError):
    """The database schema is newer than this library, or a migration is unfinished."""


class QueueInUse(AlkstoreError):
    """The queue cannot be deleted while another queue names it as its dead-letter queue."""


class DriverUnavailable(AlkstoreError, ImportError):
    """A driver's client library is not installed. Names the extra that brings it."""

    def __init__(self, driver: str, install: str) -> None:
        super().__init__(f"driver {driver!r} needs its client library: {install}")
        self.driver = driver
        self.install = install


class UnsupportedByDriver(AlkstoreError):
    """The chosen driver cannot do what the call needs (its client library lacks it)."""

    def __init__(self, driver: str, what: str, instead: str = "") -> None:
        hint = f"; {instead}" if instead else ""
        super().__init__(f"driver {driver!r} cannot {what}{hint}")
        self.driver = driver
        self.what = what


class ListenerClosed(AlkstoreError, ConnectionError):
    """A LISTEN/NOTIFY listener's connection is closed or was lost; open a new listener."""


# --- connection faults and deadlines (docs/guarantees.md, "Errors and retries") -----------


class ConnectionFailed(AlkstoreError, ConnectionError):
    """The call could not reach the database, or its transaction was rolled back with its
    connection: nothing it asked for took effect, so retrying it is safe.

    The driver's exception is chained (``__cause__``)."""

    retry_safe = True
    """Retrying the same call cannot apply it twice."""


class ConnectionLost(AlkstoreError, ConnectionError):
    """The connection died after the call may have reached the server: the outcome is
    unknown. The call may or may not have taken effect; retry only what is idempotent (a
    ``send`` with your own job ``id``, a ``complete`` fenced by its :class:`Job`).

    The driver's exception is chained (``__cause__``)."""

    retry_safe = False
    """The outcome is unknown: a blind retry may apply the call twice."""


class DeadlineExceeded(ConnectionLost, TimeoutError):
    """A call outlived its deadline (a stalled network, an unresponsive server): the
    connection was abandoned mid-call, so, as with :class:`ConnectionLost`, the outcome is
    unknown."""


class StatementTimeout(AlkstoreError, TimeoutError):
    """The server cancelled a statement at ``statement_timeout`` or ``lock_timeout``: it was
    rolled back (with its transaction), so retrying is safe.

    The driver's exception is chained (``__cause__``)."""

    retry_safe = True
    """Retrying the same call cannot apply it twice."""


class MigrationLocked(SchemaVersionError, TimeoutError):
    """Another session held the migration lock for longer than the lock timeout; the
    message names it (pid, application_name, client address) so it can be found."""


class WaitTimeout(AlkstoreError, TimeoutError):
    """``wait`` gave up: the job had not finished (completed, failed or cancelled) within
    its ``timeout``. It keeps running; :attr:`job` is how it was last seen."""

    def __init__(self, queue: str, job_id: object, timeout: float, job: Job) -> None:
        super().__init__(
            f"job {job_id} of queue {queue!r} did not finish within {timeout:g} s "
            f"(last seen {job.state.value})"
        )
        self.queue = queue
        self.job_id = job_id
        self.job = job
        """The :class:`~.records.Job` as last read."""


class JobNotFound(AlkstoreError, LookupError):
    """No job of that id is in the queue (never sent, deleted, or moved by ``redrive``)."""

    def __init__(self, queue: str, job_id: object) -> None:
        super().__init__(f"queue {queue!r} has no job {job_id}")
        self.queue = queue
        self.job_id = job_id


class ScheduleNotFound(AlkstoreError, LookupError):
    """No schedule of that queue has that key."""

    def __init__(self, name: str, key: str) -> None:
        super().__init__(f"queue {name!r} has no schedule with key {key!r}")
        self.name = name
        self.key = key


class MetadataNotFetched(AlkstoreError, AttributeError):
    """A metadata field of a lean :class:`~.records.Job` was read: ``fetch`` and
    ``complete_and_fetch`` leave it out unless ``include_metadata=True`` (``get_job`` always
    reads it). An ``AttributeError``, so ``hasattr(job, name)`` is False (docs/guide.md,
    "Lean jobs")."""

    def __init__(self, field: str) -> None:
        super().__init__(
            f"Job.{field} was not fetched: pass include_metadata=True to fetch or "
            "complete_and_fetch, or read the job with get_job"
        )
        self.field = field
        """The field that was read."""


# --- refusals: the server answered, and retrying will not change its answer --------------


class PermissionDenied(AlkstoreError, PermissionError):
    """The server refused the call for lack of a privilege (SQLSTATE 42501): the role needs
    a ``GRANT`` (docs/deployment.md, "Least privilege"). Nothing took effect; the message
    names the object and the privilege as far as the server said them.

    The driver's exception is chained (``__cause__``)."""

    def __init__(self, operation: str, reason: str) -> None:
        super().__init__(
            f"{operation}: permission denied: {reason} (SQLSTATE 42501: the role lacks a "
            "privilege; grant it, see docs/deployment.md)"
        )
        self.operation = operation
        self.reason = reason
        """The server's own words (``permission denied for table jobs``)."""


class AuthenticationFailed(AlkstoreError):
    """The server refused the login (SQLSTATE class 28: a wrong password, an unknown role,
    no ``pg_hba.conf`` entry). Retrying with the same DSN will not help.

    The driver's exception is chained (``__cause__``)."""


class DatabaseNotFound(AlkstoreError, LookupError):
    """The database the DSN names does not exist (SQLSTATE 3D000). Retrying with the same
    DSN will not help.

    The driver's exception is chained (``__cause__``)."""
