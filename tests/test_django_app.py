"""The Django app (``alkstore.contrib.django``) in the example project (examples/django_shop):
``manage.py migrate`` installs the schema, Django's runserver answers over a socket with the
job committed (or rolled back) with the view's ``transaction.atomic()`` block, and
``manage.py alkstore_worker`` runs the task until SIGTERM. The settings checks run in this
process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx
import psycopg
import pytest

import alkstore
from databases import scratch_database
from web_servers import EXAMPLES, Process, free_port, serving

QUEUE = "confirmations"
MANAGE = [sys.executable, "manage.py"]


def _run(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py *args`` on the database ``dsn``, to its end."""
    env = {**os.environ, "SHOP_DSN": dsn, "PYTHONUNBUFFERED": "1"}
    command = [*MANAGE, *args]
    return subprocess.run(
        command, cwd=EXAMPLES, env=env, capture_output=True, text=True, timeout=120
    )


def _manage(dsn: str, *args: str) -> str:
    done = _run(dsn, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _refused(done: subprocess.CompletedProcess[str], named: str) -> None:
    """The command failed with Django's one-line CommandError naming ``named``."""
    assert done.returncode == 1
    assert done.stderr.startswith("CommandError:") and named in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def shop_dsn(pg_dsn: str) -> Iterator[str]:
    """A fresh database, migrated by ``manage.py migrate``."""
    with scratch_database(pg_dsn, "django") as dsn:
        out = _manage(dsn, "migrate")
        assert "alkstore schema 'shop': version" in out, out
        yield dsn


@pytest.fixture
def server(shop_dsn: str) -> Iterator[str]:
    """Django's runserver on the migrated database; its URL."""
    port = free_port()
    command = [*MANAGE, "runserver", f"127.0.0.1:{port}", "--noreload"]
    url = f"http://127.0.0.1:{port}"
    with serving(command, url=f"{url}/orders", env={"SHOP_DSN": shop_dsn}, cwd=EXAMPLES):
        yield url


def _post(client: httpx.Client, email: str) -> httpx.Response:
    return client.post("/orders", json={"email": email, "item": "book"})


def test_migrate_installed_the_schema(shop_dsn: str) -> None:
    with alkstore.connect(shop_dsn, schema="shop", migrate=False) as store:
        assert store.schema_version() is not None


def test_the_job_commits_and_rolls_back_with_the_views_atomic_block(
    server: str, shop_dsn: str
) -> None:
    with (
        httpx.Client(base_url=server, timeout=30) as client,
        psycopg.connect(shop_dsn, autocommit=True) as outside,
        alkstore.connect(shop_dsn, schema="shop", migrate=False) as store,
    ):
        refused = _post(client, "nobody")  # raises inside atomic(), after the send
        assert refused.status_code == 422, refused.text
        assert store.list_jobs(QUEUE) == []
        for n in range(20):
            placed = _post(client, f"u{n}@example.com")
            assert placed.status_code == 201, placed.text
            # Visible from another connection the moment the response is in.
            job = store.get_job(QUEUE, placed.json()["job"])
            assert job is not None and job.data == {"order": placed.json()["order"]}
        emails = outside.execute("SELECT email FROM django_shop_order").fetchall()
        assert len(emails) == 20 and ("nobody",) not in emails
        assert len(store.list_jobs(QUEUE)) == 20


def test_the_worker_command_runs_the_task_and_stops_on_sigterm(server: str, shop_dsn: str) -> None:
    command = [*MANAGE, "alkstore_worker", "--queues", QUEUE, "--concurrency", "2"]
    worker = Process(command, env={"SHOP_DSN": shop_dsn}, cwd=EXAMPLES)
    try:
        worker.wait_for(lambda: "alkstore worker running" in worker.output, "start", 60)
        with httpx.Client(base_url=server, timeout=30) as client:
            placed = _post(client, "ada@example.com")
        assert placed.status_code == 201, placed.text
        with psycopg.connect(shop_dsn, autocommit=True) as conn:
            order = placed.json()["order"]
            worker.wait_for(lambda: _confirmed(conn, order), "confirmation", 30)
    finally:
        status = worker.stop(signal.SIGTERM)
    assert status == 0, worker.output
    assert "alkstore worker stopped" in worker.output
    with alkstore.connect(shop_dsn, schema="shop", migrate=False) as store:
        (job,) = store.list_jobs(QUEUE)
    assert job.state is alkstore.JobState.COMPLETED and job.output == {"sent": True}


def _confirmed(conn: psycopg.Connection, order: int) -> bool:
    query = "SELECT confirmed FROM django_shop_order WHERE id = %s"
    return conn.execute(query, (order,)).fetchone() == (True,)


def test_a_task_after_its_threads_django_connection_broke_reconnects(
    server: str, shop_dsn: str
) -> None:
    command = [*MANAGE, "alkstore_worker", "--concurrency", "1"]
    worker = Process(command, env={"SHOP_DSN": shop_dsn}, cwd=EXAMPLES)
    try:
        worker.wait_for(lambda: "alkstore worker running" in worker.output, "start", 60)
        with (
            httpx.Client(base_url=server, timeout=30) as client,
            psycopg.connect(shop_dsn, autocommit=True) as outside,
        ):
            first = _post(client, "ada@example.com").json()["order"]
            worker.wait_for(lambda: _confirmed(outside, first), "first confirmation", 30)
            # The worker thread's Django connection (its last query was the task's UPDATE),
            # as a database restart or an idle timeout would leave it.
            killed = outside.execute(
                """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                   WHERE datname = current_database() AND pid <> pg_backend_pid()
                   AND query LIKE 'UPDATE "django_shop_order"%'"""
            ).fetchall()
            assert killed == [(True,)]
            second = _post(client, "bob@example.com").json()["order"]
            worker.wait_for(lambda: _confirmed(outside, second), "second confirmation", 30)
    finally:
        assert worker.stop(signal.SIGINT) == 0, worker.output
    # The health check found the broken connection before the task used it.
    with alkstore.connect(shop_dsn, schema="shop", migrate=False) as store:
        jobs = store.list_jobs(QUEUE)
    assert [(job.state, job.retry_count) for job in jobs] == [(alkstore.JobState.COMPLETED, 0)] * 2


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--tasks", "django_shop.tasks:nothing"], "django_shop.tasks:nothing"),
        (["--tasks", "django_shop.views:place_order"], "not a Tasks"),
        (["--queues", "confirmations,nope"], "'nope'"),
        (["--concurrency", "0"], "concurrency"),
    ],
)
def test_the_worker_command_refuses_bad_arguments_in_one_line(
    shop_dsn: str, arguments: list[str], named: str
) -> None:
    _refused(_run(shop_dsn, "alkstore_worker", *arguments), named)


def test_the_worker_command_refuses_a_database_without_the_schema(pg_dsn: str) -> None:
    with scratch_database(pg_dsn, "django") as dsn:
        done = _run(dsn, "alkstore_worker")
        _refused(done, "schema 'shop' is not installed")
        assert "manage.py migrate" in done.stderr
        with psycopg.connect(dsn) as conn:  # and it created nothing
            found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'shop'").fetchall()
        assert found == []


@pytest.fixture
def django_settings(monkeypatch: pytest.MonkeyPatch, pg_dsn: str) -> None:
    """The example's settings, loaded in this process (no database is touched)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("SHOP_DSN", pg_dsn)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "django_shop.settings")
    import django

    django.setup(set_prefix=False)


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ({"SCHEME": "x"}, "unknown keys ['SCHEME']"),
        ({"DATABASE": "other"}, "'other': not in DATABASES"),
        ({"TASKS": "no_colon"}, "expected pkg.module:name"),
        ({"OPTIONS": {"schema": "x"}}, "['schema'] are set by the app"),
        ({"OPTIONS": {"pool_size": 0}}, "pool_size"),
        ({"SCHEMA": "bad name"}, "schema"),
        ([], "must be a dict"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(
    django_settings: None, setting: object, named: str
) -> None:
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from alkstore.contrib.django.settings import load

    with override_settings(ALKSTORE=setting), pytest.raises(ImproperlyConfigured) as refused:
        load()
    assert named in str(refused.value)


def test_the_apps_own_connections_follow_djangos_database_settings(
    django_settings: None, pg_dsn: str
) -> None:
    from alkstore.contrib.django.settings import load

    found = load()
    assert found.schema == "shop" and found.tasks == "django_shop.tasks:tasks"
    with psycopg.connect(found.own_dsn()) as conn, psycopg.connect(pg_dsn) as expected:
        assert conn.info.dbname == expected.info.dbname
        assert conn.info.port == expected.info.port
