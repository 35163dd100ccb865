"""The ``ALKSTORE`` Django setting, checked when the app loads (docs/frameworks.md).

``ALKSTORE = {"SCHEMA": "alkstore", "TASKS": "myapp.tasks:tasks"}``; every key is optional:

- ``DATABASE``: the alias in ``DATABASES`` whose connection :func:`~alkstore.contrib.django.store`
  joins and whose settings the app's own connections use (default ``"default"``);
- ``DSN``: a ``postgresql://`` URI for the app's own connections (the worker's, the schema
  install's) instead of the ``DATABASE``'s settings, e.g. straight to the server when Django
  goes through a pooler;
- ``SCHEMA``: alkstore's schema (default ``"alkstore"``);
- ``TASKS``: the :class:`alkstore.Tasks` registry ``manage.py alkstore_worker`` runs, as
  ``pkg.module:name``;
- ``OPTIONS``: more keyword options of :func:`alkstore.connect` (``pool_size``, ``pooler``,
  ``listen_dsn``, the timeouts …), for the app's own connections.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import attrs
import psycopg
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from alkstore.core.errors import InvalidOptions
from alkstore.core.kwargs import ConnectKwargs
from alkstore.store import ConnectOptions

SETTING = "ALKSTORE"
"""The name of the Django setting."""
SET_BY_THE_APP = frozenset({"schema", "migrate", "driver"})
"""Options of :func:`alkstore.connect` the app sets itself (``SCHEMA``; psycopg, Django's
driver; the schema is installed by ``manage.py migrate``), refused in ``OPTIONS``."""


@attrs.frozen(kw_only=True)
class AlkstoreSettings:
    """The ``ALKSTORE`` setting, checked: see the module's docstring for each key."""

    database: str = "default"
    dsn: str | None = None
    schema: str = "alkstore"
    tasks: str | None = None
    options: Mapping[str, Any] = attrs.field(factory=dict)

    def connect_options(self, *, migrate: bool = False) -> ConnectKwargs:
        """Keyword options of :func:`alkstore.connect` for the app's own connections."""
        options: ConnectKwargs = {"schema": self.schema, "driver": "psycopg", "migrate": migrate}
        options.update(self.options)  # type: ignore[typeddict-item]
        return options

    def own_dsn(self) -> str:
        """Where the app's own connections go: ``DSN``, else the ``DATABASE``'s settings as
        a URI (read now, so a test database Django switched to is followed)."""
        if self.dsn is not None:
            return self.dsn
        params = connections[self.database].get_connection_params()
        known = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}
        # Django adds psycopg arguments (cursor_factory, context …) that are not libpq's.
        query = {key: str(value) for key, value in params.items() if key in known}
        return "postgresql://?" + urlencode(query)


def load() -> AlkstoreSettings:
    """The ``ALKSTORE`` setting, checked (absent: all defaults); ImproperlyConfigured names
    the key and value that are wrong."""
    raw = getattr(django_settings, SETTING, {})
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured(f"{SETTING} must be a dict, not {type(raw).__name__}")
    keys = {field.name.upper(): field.name for field in attrs.fields(AlkstoreSettings)}
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise ImproperlyConfigured(f"{SETTING}: unknown keys {unknown}; known: {sorted(keys)}")
    found = AlkstoreSettings(**{keys[key]: value for key, value in raw.items()})
    _check(found)
    return found


def _check(found: AlkstoreSettings) -> None:
    if found.database not in django_settings.DATABASES:
        raise ImproperlyConfigured(f"{SETTING}['DATABASE']={found.database!r}: not in DATABASES")
    engine = django_settings.DATABASES[found.database].get("ENGINE", "")
    if engine != "django.db.backends.postgresql":
        raise ImproperlyConfigured(
            f"{SETTING}['DATABASE']={found.database!r}: its ENGINE is {engine!r}, and "
            "alkstore joins Django's transactions on django.db.backends.postgresql only"
        )
    if found.tasks is not None and ":" not in found.tasks:
        raise ImproperlyConfigured(f"{SETTING}['TASKS']={found.tasks!r}: expected pkg.module:name")
    refused = sorted(SET_BY_THE_APP & set(found.options))
    if refused:
        raise ImproperlyConfigured(f"{SETTING}['OPTIONS']: {refused} are set by the app")
    try:
        ConnectOptions(**found.connect_options())
    except (InvalidOptions, TypeError) as exc:
        raise ImproperlyConfigured(f"{SETTING}: {exc}") from exc
