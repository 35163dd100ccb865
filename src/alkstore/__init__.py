"""alkstore: a job-queue storage engine for PostgreSQL and the databases that speak its protocol.

Open a store with :func:`connect` (sync) or :func:`connect_async`, create a queue, send jobs,
fetch them, complete or fail them.
"""

from .core.attempts import Snooze
from .core.errors import (
    AlkstoreError,
    AuthenticationFailed,
    ConnectionFailed,
    ConnectionLost,
    DatabaseNotFound,
    DeadlineExceeded,
    DriverUnavailable,
    FlowRefused,
    InvalidOptions,
    JobConflict,
    JobNotFound,
    ListenerClosed,
    MetadataNotFetched,
    MigrationLocked,
    PermissionDenied,
    QueueExists,
    QueueInUse,
    QueueNotFound,
    QueueOptionsDiffer,
    ScheduleNotFound,
    SchemaVersionError,
    StatementTimeout,
    UnsupportedByDriver,
    UnsupportedByEngine,
    WaitTimeout,
)
from .core.kwargs import ConnectKwargs, JobOptionsKwargs, QueueOptionsKwargs
from .core.options import JobOptions, Policy, QueueOptions
from .core.queries import JobPage
from .core.records import (
    FailedAttempt,
    Handoff,
    Job,
    MaintenanceReport,
    Queue,
    QueueStats,
    WorkerProcess,
)
from .core.states import JobState
from .store import AsyncConnector, AsyncStore, Store, connect, connect_async
from .tasks import Task, Tasks
from .worker import AsyncJobContext, JobContext

__all__ = [
    "AlkstoreError",
    "AsyncConnector",
    "AsyncJobContext",
    "AsyncStore",
    "AuthenticationFailed",
    "ConnectKwargs",
    "ConnectionFailed",
    "ConnectionLost",
    "DatabaseNotFound",
    "DeadlineExceeded",
    "DriverUnavailable",
    "FailedAttempt",
    "FlowRefused",
    "Handoff",
    "InvalidOptions",
    "Job",
    "JobConflict",
    "JobContext",
    "JobNotFound",
    "JobOptions",
    "JobOptionsKwargs",
    "JobPage",
    "JobState",
    "ListenerClosed",
    "MaintenanceReport",
    "MetadataNotFetched",
    "MigrationLocked",
    "PermissionDenied",
    "Policy",
    "Queue",
    "QueueExists",
    "QueueInUse",
    "QueueNotFound",
    "QueueOptions",
    "QueueOptionsDiffer",
    "QueueOptionsKwargs",
    "QueueStats",
    "ScheduleNotFound",
    "SchemaVersionError",
    "Snooze",
    "StatementTimeout",
    "Store",
    "Task",
    "Tasks",
    "UnsupportedByDriver",
    "UnsupportedByEngine",
    "WaitTimeout",
    "WorkerProcess",
    "connect",
    "connect_async",
]
