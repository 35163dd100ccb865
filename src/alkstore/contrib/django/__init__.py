"""alkstore as a Django app: add ``"alkstore.contrib.django"`` to ``INSTALLED_APPS``.

- :func:`store` is the store on Django's own connection: a job sent with it inside
  ``transaction.atomic()`` commits or rolls back with the block.
- ``manage.py migrate`` installs (or upgrades) alkstore's schema.
- ``manage.py alkstore_worker`` runs the ``ALKSTORE["TASKS"]`` registry.

Settings (the ``ALKSTORE`` dict) are described in :mod:`.settings` and docs/frameworks.md.
"""

from __future__ import annotations

import threading

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

import alkstore
from alkstore.cli.worker import load_target

from .settings import load

_shared: alkstore.Store | None = None
_shared_lock = threading.Lock()


def open_store(*, migrate: bool = False) -> alkstore.Store:
    """A new store on connections of its own (not Django's), from the ``ALKSTORE`` setting;
    the caller closes it. ``migrate``: install or upgrade the schema first; without it a
    schema that is not installed is ImproperlyConfigured (``manage.py migrate`` installs it)."""
    found = load()
    opened = alkstore.connect(found.own_dsn(), **found.connect_options(migrate=migrate))
    try:
        if opened.schema_version() is None:
            raise ImproperlyConfigured(
                f"alkstore's schema {found.schema!r} is not installed in that database "
                "(manage.py migrate installs it)"
            )
    except BaseException:
        opened.close()
        raise
    return opened


def load_tasks(spec: str) -> alkstore.Tasks:
    """The :class:`alkstore.Tasks` registry ``spec`` (``pkg.module:name``) names;
    ImproperlyConfigured says what is wrong."""
    try:
        found = load_target(spec)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from exc
    if not isinstance(found, alkstore.Tasks):
        raise ImproperlyConfigured(f"tasks {spec!r} is a {type(found).__name__}, not a Tasks")
    return found


def _process_store() -> alkstore.Store:
    global _shared
    with _shared_lock:
        if _shared is None:
            opened = open_store()
            spec = load().tasks
            if spec is not None:
                # Created here, committed, so that no send in a request's transaction has to
                # (a queue created there would vanish if that transaction rolled back).
                load_tasks(spec).ensure_queues(opened)
            _shared = opened
        return _shared


def store(using: str | None = None) -> alkstore.Store:
    """The store on Django's connection to the database ``using`` (default: the
    ``ALKSTORE["DATABASE"]``) in this thread: its calls run inside the transaction open there,
    so inside ``transaction.atomic()`` a job is sent if and only if the block commits (and
    outside one, each call commits on its own, as Django's autocommit does).

    Call it where you send: it costs no round trip of its own (Django connects first if it
    has not yet; the first call in a process opens the store its sends are made with, which
    checks the schema once). From a sync context only, as every use of Django's connection.
    """
    wrapper = connections[using or load().database]
    wrapper.ensure_connection()
    return _process_store().using(wrapper.connection)


__all__ = ["load_tasks", "open_store", "store"]
