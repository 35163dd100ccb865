"""The error classes every engine and driver raises through."""

from __future__ import annotations


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


class JobConflict(AlkstoreError):
    """A job with that id already exists in the queue."""


class InvalidOptions(AlkstoreError, ValueError):
    """An option or argument is invalid. Names the field and the value; nothing was written."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        super().__init__(f"{field}={value!r}: {reason}")
        self.field = field
        self.value = value
        self.reason = reason


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
