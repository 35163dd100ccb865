"""The app's configuration: checks the ``ALKSTORE`` setting when Django starts, and installs
alkstore's schema after ``manage.py migrate``."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AlkstoreConfig(AppConfig):
    """``alkstore.contrib.django``, labelled ``alkstore``."""

    name = "alkstore.contrib.django"
    label = "alkstore"
    verbose_name = "alkstore"

    def ready(self) -> None:
        """Check the setting now (a mistake fails at start, naming the key), and install the
        schema when ``migrate`` runs on the app's database."""
        from .settings import load

        load()
        post_migrate.connect(_install_schema, sender=self)


def _install_schema(
    sender: AppConfig, using: str, verbosity: int = 1, stdout: TextIO | None = None, **_: Any
) -> None:
    from . import open_store
    from .settings import load

    found = load()
    if using != found.database:
        return
    with open_store(migrate=True) as opened:
        if verbosity >= 1:
            out = stdout or sys.stdout
            out.write(f"  alkstore schema {found.schema!r}: version {opened.schema_version()}\n")
