"""Tasks: functions an app sends as jobs and runs in one worker process (docs/tasks.md).

``tasks = alkstore.Tasks()``; ``@tasks.task`` on a sync or async function; ``f.send(store,
*args, **kwargs)``; ``tasks.worker(store)`` (or ``alkstore worker myapp.tasks:tasks``);
``tasks.drain(store)`` in tests.
"""

from .drain import Drained
from .options import TaskOptionsKwargs
from .registry import Tasks
from .task import Task
from .workers import AppWorker, AsyncAppWorker

__all__ = ["AppWorker", "AsyncAppWorker", "Drained", "Task", "TaskOptionsKwargs", "Tasks"]
