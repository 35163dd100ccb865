"""``manage.py alkstore_worker``: run a :class:`alkstore.Tasks` registry until SIGTERM or
SIGINT.

The registry is ``ALKSTORE["TASKS"]`` (or ``--tasks pkg.module:name``); the store is opened
on connections of its own from the ``ALKSTORE`` setting. Around each task call Django's
stale or broken connections of the worker thread are closed, as Django does around each
request (``close_old_connections``), so a task after a database restart reconnects. The first
signal stops fetching and gives running tasks ``--stop-timeout`` seconds to finish; a second
one exits at once.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections.abc import Callable
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

import alkstore
from alkstore.cli.worker import INTERRUPTED
from alkstore.contrib.django import load_tasks, open_store
from alkstore.contrib.django.settings import load


class Command(BaseCommand):
    """Run the app's tasks in this process until SIGTERM or SIGINT."""

    help = "Run the ALKSTORE['TASKS'] registry's tasks until SIGTERM or SIGINT."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--tasks``, ``--queues``, ``--concurrency``, ``--stop-timeout``."""
        parser.add_argument("--tasks", help="the registry, pkg.module:name (ALKSTORE['TASKS'])")
        parser.add_argument(
            "--queues", help="comma-separated: run only these queues' tasks (default: all)"
        )
        parser.add_argument(
            "--concurrency", type=int, help="jobs run at once (default: the registry's)"
        )
        parser.add_argument(
            "--stop-timeout", type=float, default=30.0, help="seconds running tasks get to end"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Start the worker, wait for a signal, stop it."""
        registry = _registry(options["tasks"] or load().tasks)
        worker_options: dict[str, Any] = {}
        if options["queues"]:
            worker_options["queues"] = [q.strip() for q in options["queues"].split(",")]
        if options["concurrency"] is not None:
            worker_options["concurrency"] = options["concurrency"]
        stop = threading.Event()

        def on_signal(signum: int, _frame: Any) -> None:
            if stop.is_set():
                os._exit(INTERRUPTED)
            self.stderr.write(f"{signal.Signals(signum).name}: stopping")
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        try:
            opened = open_store()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        with opened as store:
            try:
                worker = registry.worker(cast(alkstore.Store, _Requests(store)), **worker_options)
            except alkstore.InvalidOptions as exc:  # an unknown queue, a concurrency below 1
                raise CommandError(str(exc)) from exc
            self.stderr.write("alkstore worker running")
            while not stop.wait(0.5):
                pass
            worker.stop(options["stop_timeout"])
        self.stderr.write("alkstore worker stopped")


class _Requests:
    """``store`` as the registry's worker sees it: each handler it starts is wrapped the way
    Django wraps a request, closing the thread's stale or broken connections before and
    after (only ``work`` differs; everything else is the store's)."""

    def __init__(self, store: alkstore.Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def work(self, queue: str, handler: Callable[[alkstore.Job], Any], **options: Any) -> Any:
        """``store.work`` with ``handler`` between two ``close_old_connections()``."""

        def handle(job: alkstore.Job) -> Any:
            close_old_connections()
            try:
                return handler(job)
            finally:
                close_old_connections()

        return self._store.work(queue, handle, **options)


def _registry(spec: str | None) -> alkstore.Tasks:
    if spec is None:
        raise CommandError("no tasks to run: set ALKSTORE['TASKS'] or pass --tasks")
    try:
        return load_tasks(spec)
    except ImproperlyConfigured as exc:
        raise CommandError(str(exc)) from exc
