"""Settings: the database comes from ``SHOP_DSN`` (a ``postgresql://`` URI); alkstore's app
joins its connection (``ALKSTORE``: docs/frameworks.md)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

_dsn = urlsplit(os.environ["SHOP_DSN"])
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",  # psycopg 3
        "NAME": _dsn.path.lstrip("/"),
        "USER": _dsn.username or "",
        "PASSWORD": _dsn.password or "",
        "HOST": _dsn.hostname or "",
        "PORT": str(_dsn.port or ""),
        # Persistent connections, checked before reuse: in a request and, as
        # manage.py alkstore_worker closes stale ones around each task, in a task.
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }
}
INSTALLED_APPS = ["alkstore.contrib.django", "django_shop"]
ALKSTORE = {"SCHEMA": "shop", "TASKS": "django_shop.tasks:tasks"}
ROOT_URLCONF = "django_shop.urls"
SECRET_KEY = "example-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
MIDDLEWARE: list[str] = []
