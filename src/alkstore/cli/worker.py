"""``alkstore worker pkg.module:handler --queue q``: run a handler until SIGTERM or SIGINT.

The first signal drains: no new jobs are fetched, running handlers see ``ctx.cancelled`` and
get ``--stop-timeout`` seconds to return, and whatever still runs then is failed so that it
retries at once. A second signal exits at once (jobs still running stay active until their
expiry). Progress goes to stdlib ``logging``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import alkstore

logger = logging.getLogger("alkstore.cli.worker")
INTERRUPTED = 130
"""Exit status after a second signal (the shell's convention for SIGINT)."""


def register(subparsers: Any) -> None:
    """Add the ``worker`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "worker", help="run a handler on a queue's jobs until SIGTERM/SIGINT"
    )
    parser.add_argument("target", metavar="handler", help="the handler, as pkg.module:function")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--dsn", required=True, help="postgresql://… or pglite:///dir")
    parser.add_argument("--engine", default=None)
    parser.add_argument("--driver", default="psycopg", choices=("psycopg", "pg8000"))
    parser.add_argument("--schema", default="alkstore")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--batch-size", type=int, default=None, help="hand the handler lists of up to N jobs"
    )
    parser.add_argument("--poll-interval", type=float, default=1.0)
    parser.add_argument("--stop-timeout", type=float, default=30.0)
    parser.add_argument("--log-level", default="INFO")
    parser.set_defaults(handler=_run)


def load_handler(spec: str) -> Callable[..., Any]:
    """``pkg.module:attr.path`` -> the object (a clear ValueError when it is not there)."""
    module_name, _, path = spec.partition(":")
    if not module_name or not path:
        raise ValueError(f"handler {spec!r}: expected pkg.module:function")
    target: Any = importlib.import_module(module_name)
    for part in path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"handler {spec!r}: {module_name} has no {path}") from None
    if not callable(target):
        raise ValueError(f"handler {spec!r} is not callable")
    return target  # type: ignore[no-any-return]


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        handler = load_handler(args.target)
    except (ImportError, ValueError) as exc:
        logger.error("%s", exc)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        if stop.is_set():
            logger.warning("second %s: exiting now", signal.Signals(signum).name)
            os._exit(INTERRUPTED)
        logger.info("%s: draining (up to %s s)", signal.Signals(signum).name, args.stop_timeout)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    options: dict[str, Any] = {
        "concurrency": args.concurrency,
        "poll_interval": args.poll_interval,
    }
    if args.batch_size is not None:
        options.update(batch=True, batch_size=args.batch_size)
    with alkstore.connect(
        args.dsn, engine=args.engine, driver=args.driver, schema=args.schema
    ) as store:
        worker = store.work(args.queue, handler, **options)
        logger.info("working on queue %r with %s", args.queue, args.target)
        while not stop.wait(0.5):
            pass
        worker.stop(args.stop_timeout)
        logger.info("stopped")
    return 0
