"""The examples in examples/ run against the run's real PostgreSQL, each in a database of its
own: the FastAPI app through FastAPI's TestClient (its lifespan starts the worker), the Django
project through Django's test client."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import alkstore
from databases import scratch_database

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


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


def test_fastapi_enqueues_in_the_requests_transaction_and_the_worker_runs(
    shop_dsn: str,
) -> None:
    import fastapi_shop
    from fastapi.testclient import TestClient

    with TestClient(fastapi_shop.create_app(shop_dsn)) as client:
        placed = client.post("/orders", json={"email": "ada@example.com", "item": "book"})
        assert placed.status_code == 201, placed.text
        refused = client.post("/orders", json={"email": "nobody", "item": "lamp"})
        assert refused.status_code == 422
        order = placed.json()["order"]
        deadline = time.monotonic() + 30
        while not client.get(f"/orders/{order}").json()["confirmed"]:
            assert time.monotonic() < deadline, "the worker never confirmed the order"
            time.sleep(0.05)
    # The refused order rolled back with its job: one order, one job, completed.
    with psycopg.connect(shop_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM shop_order").fetchone() == (1,)
    (job,) = _jobs(shop_dsn)
    assert job.data == {"order": order, "to": "ada@example.com"}
    assert str(job.id) == placed.json()["job"]
    assert job.state is alkstore.JobState.COMPLETED


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
