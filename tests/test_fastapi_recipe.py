"""The FastAPI recipe (examples/fastapi_shop.py, docs/frameworks.md) served by a real uvicorn
process over HTTP: the request's transaction commits before the response leaves, a commit
that fails becomes an error response, and the worker beside the app runs the jobs.

FastAPI's TestClient cannot see the first two: it runs the whole request, dependency exits
included, before handing back the response."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pytest

import alkstore
from databases import scratch_database
from web_servers import EXAMPLES, free_port, serving

QUEUE = "confirmations"
FAILS_AT_COMMIT = "fails-at-commit"
"""An item the test's deferred constraint refuses, which PostgreSQL checks at COMMIT."""


@pytest.fixture
def shop(pg_dsn: str) -> Iterator[tuple[str, str]]:
    """The example app served by uvicorn on a fresh database: (its URL, the database)."""
    with scratch_database(pg_dsn, "fastapi") as dsn:
        port = free_port()
        command = [sys.executable, "-m", "uvicorn", "fastapi_shop:app", "--app-dir"]
        command += [str(EXAMPLES), "--port", str(port), "--no-access-log"]
        url = f"http://127.0.0.1:{port}"
        with serving(
            command, url=f"{url}/orders/{uuid.uuid4()}", env={"SHOP_DSN": dsn}, cwd=EXAMPLES
        ):
            yield url, dsn


def _order_visible(conn: psycopg.Connection, order: str) -> bool:
    return conn.execute("SELECT 1 FROM shop_order WHERE id = %s", (order,)).fetchone() is not None


def test_each_response_arrives_after_its_commit(shop: tuple[str, str]) -> None:
    url, dsn = shop
    invisible = []
    with (
        httpx.Client(base_url=url, timeout=30) as client,
        psycopg.connect(dsn, autocommit=True) as outside,
        alkstore.connect(dsn, schema="shop", migrate=False) as store,
    ):
        for n in range(100):
            placed = client.post("/orders", json={"email": f"u{n}@example.com", "item": "book"})
            assert placed.status_code == 201, placed.text
            # Checked from another connection the moment the response is in.
            order, job = placed.json()["order"], placed.json()["job"]
            if not _order_visible(outside, order) or store.get_job(QUEUE, job) is None:
                invisible.append(n)
    assert invisible == [], f"{len(invisible)} of 100 answered before their commit"


def test_a_failing_commit_is_an_error_response_and_leaves_no_job(shop: tuple[str, str]) -> None:
    url, dsn = shop
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            """CREATE FUNCTION refuse_item() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN
                 IF NEW.item = 'fails-at-commit' THEN
                   RAISE EXCEPTION 'refused at commit' USING ERRCODE = 'check_violation';
                 END IF;
                 RETURN NULL;
               END $$"""
        )
        conn.execute(
            """CREATE CONSTRAINT TRIGGER refuse_item AFTER INSERT ON shop_order
               DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_item()"""
        )
    with httpx.Client(base_url=url, timeout=30) as client:
        failed = client.post("/orders", json={"email": "eve@example.com", "item": FAILS_AT_COMMIT})
        assert failed.status_code == 503, failed.text
        assert failed.json() == {"detail": "not saved: the transaction did not commit"}
        placed = client.post("/orders", json={"email": "ada@example.com", "item": "book"})
        assert placed.status_code == 201, placed.text
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT email FROM shop_order").fetchall() == [("ada@example.com",)]
    with alkstore.connect(dsn, schema="shop", migrate=False) as store:
        jobs = store.list_jobs(QUEUE)
    assert [job.data["to"] for job in jobs] == ["ada@example.com"]


def test_a_refused_order_rolls_back_with_its_job_and_the_worker_confirms(
    shop: tuple[str, str],
) -> None:
    url, dsn = shop
    with httpx.Client(base_url=url, timeout=30) as client:
        refused = client.post("/orders", json={"email": "nobody", "item": "lamp"})
        assert refused.status_code == 422, refused.text
        placed = client.post("/orders", json={"email": "ada@example.com", "item": "book"})
        assert placed.status_code == 201, placed.text
        order = placed.json()["order"]
        deadline = time.monotonic() + 30
        while not client.get(f"/orders/{order}").json()["confirmed"]:
            assert time.monotonic() < deadline, "the worker never confirmed the order"
            time.sleep(0.05)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM shop_order").fetchone() == (1,)
    with alkstore.connect(dsn, schema="shop", migrate=False) as store:
        (job,) = store.list_jobs(QUEUE)
    assert job.data == {"order": order, "to": "ada@example.com"}
    assert str(job.id) == placed.json()["job"]
    assert job.state is alkstore.JobState.COMPLETED
