"""``alkstore worker myapp.tasks:tasks`` (a :class:`~alkstore.Tasks` registry) or
``alkstore worker pkg.mod:handler --queue q``: run until SIGTERM or SIGINT.

The current directory is on ``sys.path`` (as uvicorn does), ``--dsn`` defaults to
``$ALKSTORE_DSN``, and the schema is never installed (``alkstore migrate`` does that). The
first signal drains: no new jobs are fetched, running handlers see ``ctx.cancelled`` and get
``--stop-timeout`` seconds to return, and whatever still runs then is failed so that it
retries at once. ``--stop-timeout`` bounds the process: a handler still running then (one
that ignores ``ctx.cancelled``) is not waited for: the process exits with status
:data:`FORCED` (its job, failed as ``WorkerStopped``, retries; the late handler's result is
dropped). A second signal exits at once (jobs still running stay active until their
expiry). Progress goes to stdlib ``logging`` (``--log-format json``: one JSON object a
line); a failed job is logged at WARNING with its stack.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import alkstore
from alkstore.tasks.workers import AppWorker
from alkstore.worker import Worker
from alkstore.worker.loop import LoopThread

from .common import CliError, add_connection_arguments, open_store

logger = logging.getLogger("alkstore.cli.worker")
INTERRUPTED = 130
"""Exit status after a second signal (the shell's convention for SIGINT)."""
BAD_TARGET = 2
"""Exit status when the target cannot be imported or is not a handler or a registry."""
FORCED = 124
"""Exit status when handlers still ran at ``--stop-timeout`` (timeout(1)'s convention)."""


def register(subparsers: Any) -> None:
    """Add the ``worker`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "worker",
        help="run a Tasks registry, or a handler on a queue, until SIGTERM/SIGINT",
    )
    parser.add_argument(
        "target",
        metavar="target",
        help="pkg.module:tasks (a Tasks registry) or pkg.module:function (a handler, with --queue)",
    )
    parser.add_argument("--queue", default=None, help="the queue of a handler")
    parser.add_argument(
        "--queues", default=None, help="a registry's queues to run, comma-separated (default: all)"
    )
    add_connection_arguments(parser)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--batch-size", type=int, default=None, help="hand a handler lists of up to N jobs"
    )
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--stop-timeout", type=float, default=30.0)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-format", default="text", choices=("text", "json"))
    parser.set_defaults(handler=_run)


def load_target(spec: str) -> Any:
    """``pkg.module:attr.path`` -> the object, imported with the current directory on
    ``sys.path``; a ValueError in one line when it cannot be."""
    module_name, _, path = spec.partition(":")
    if not module_name or not path:
        raise ValueError(f"{spec!r}: expected pkg.module:tasks or pkg.module:function")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    for part in path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"{spec!r}: {module_name} has no {path}") from None
    if not isinstance(target, alkstore.Tasks) and not callable(target):
        raise ValueError(f"{spec!r} is neither a Tasks registry nor a function")
    return target


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the alkstore fields of a
    worker event (``alkstore_event``, ``queue``, ``job_id``) and the stack of an error."""

    FIELDS = ("alkstore_event", "queue", "job_id")

    def format(self, record: logging.LogRecord) -> str:
        """The record as JSON."""
        document: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in self.FIELDS:
            if hasattr(record, field):
                document[field] = getattr(record, field)
        if record.exc_info:
            document["stack"] = self.formatException(record.exc_info)
        return json.dumps(document, default=str)


def _logging(args: argparse.Namespace) -> None:
    handler = logging.StreamHandler()
    if args.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])


def _start(
    store: alkstore.Store, target: Any, args: argparse.Namespace, loop: LoopThread | None
) -> Worker | AppWorker:
    """Start the workers of ``target``; what stops them."""
    options: dict[str, Any] = {"poll_interval": args.poll_interval}
    if isinstance(target, alkstore.Tasks):
        if args.queue is not None or args.batch_size is not None:
            raise CliError("--queue and --batch-size are for a handler, not a Tasks registry")
        queues = None if args.queues is None else [q for q in args.queues.split(",") if q]
        app = target.worker(store, queues=queues, concurrency=args.concurrency, **options)
        logger.info("working on %s with %s", sorted(app.workers), args.target)
        return app
    if args.queue is None or args.queues is not None:
        raise CliError("a handler runs on one queue: pass --queue (not --queues)")
    handler: Callable[..., Any] = target
    if inspect.iscoroutinefunction(target):
        assert loop is not None
        handler = loop.blocking(target)
    if args.batch_size is not None:
        options.update(batch=True, batch_size=args.batch_size)
    worker = store.work(args.queue, handler, concurrency=args.concurrency, **options)
    logger.info("working on queue %r with %s", args.queue, args.target)
    return worker


def _run(args: argparse.Namespace) -> int:
    _logging(args)
    try:
        target = load_target(args.target)
    except ValueError as exc:
        logger.error("%s", exc)
        return BAD_TARGET
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if stop.is_set():
            logger.warning("second %s: exiting now", signal.Signals(signum).name)
            os._exit(INTERRUPTED)
        logger.info("%s: draining (up to %s s)", signal.Signals(signum).name, args.stop_timeout)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    loop = LoopThread() if inspect.iscoroutinefunction(target) else None
    late = 0
    try:
        with open_store(args) as store:
            worker = _start(store, target, args, loop)
            while not stop.wait(0.5):
                pass
            worker.stop(args.stop_timeout)
            late = worker.running
            logger.info("stopped")
    finally:
        if loop is not None and not late:
            loop.close()
    if late:
        _forced_exit(late, args.stop_timeout)
    return 0


def _forced_exit(late: int, timeout: float) -> None:
    """Exit now, without joining the threads of handlers that outlived ``timeout``."""
    logger.warning(
        "%d handler call(s) still running after --stop-timeout %s s: exiting without them "
        "(their jobs were failed as WorkerStopped and retry; their results are dropped)",
        late,
        timeout,
    )
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(FORCED)
