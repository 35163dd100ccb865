"""The examples in examples/ run against the run's real PostgreSQL, each in a database of its
own: here the Django project through Django's test client. The FastAPI app is served by a real
uvicorn process in tests/test_fastapi_recipe.py, and the Django project by a real server in
tests/test_django_app.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import alkstore
from databases import scratch_database
from web_servers import EXAMPLES


@pytest.fixture
def shop_dsn(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database for one example, with examples/ importable."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    with scratch_database(pg_dsn, "examples") as dsn:
        monkeypatch.setenv("SHOP_DSN", dsn)
        yield dsn


def _jobs(dsn: str) -> list[alkstore.Job]:
    with alkstore.connect(dsn, schema="shop", migrate=False) as store:
        return store.list_jobs("confirmations")


def test_django_view_enqueues_inside_atomic_on_djangos_connection(shop_dsn: str) -> None:
    import django
    from django.core.management import call_command
    from django.db import connections
    from django.test import Client

    django.setup(set_prefix=False)  # DJANGO_SETTINGS_MODULE is set just below
    from django_shop import views
    from django_shop.models import Order

    try:
        call_command("migrate", "django_shop", verbosity=0)
        client = Client()
        placed = client.post(
            "/orders", json.dumps({"email": "ada@example.com", "item": "book"}), "application/json"
        )
        assert placed.status_code == 201, placed.content
        refused = client.post(
            "/orders", json.dumps({"email": "nobody", "item": "lamp"}), "application/json"
        )
        assert refused.status_code == 422
        assert list(Order.objects.values_list("email", flat=True)) == ["ada@example.com"]
        (job,) = _jobs(shop_dsn)
        assert job.data == {"order": placed.json()["order"]}
        assert str(job.id) == placed.json()["job"]
    finally:
        if views.store.cache_info().currsize:
            views.store().close()
            views.store.cache_clear()
        connections.close_all()


@pytest.fixture(autouse=True)
def _django_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "django_shop.settings")
