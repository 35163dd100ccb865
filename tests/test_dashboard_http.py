"""The dashboard's HTTP edges, served by uvicorn against the test PostgreSQL (no browser):
token auth, safety headers, 404s, and that it never creates a schema."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

import alkstore
from alkstore.dashboard import DashboardError, DashboardSettings, create_app
from dashboard_support import serve


@pytest.fixture
def installed(pg_dsn: str, schema_name: str) -> Iterator[alkstore.Store]:
    """A store on a fresh, installed schema with one queue."""
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("emails")
        yield store


def test_a_token_is_required_and_remembered_in_a_strict_cookie(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name, token="s3cret")
    with serve(settings) as url, httpx.Client(base_url=url) as client:
        refused = client.get("/queues/emails?state=failed")
        assert refused.status_code == 401
        assert "Content-Security-Policy" in refused.headers
        assert refused.headers["content-type"].startswith("text/html")
        assert '<form method="get" action="/queues/emails">' in refused.text
        assert '<input type="hidden" name="state" value="failed">' in refused.text
        assert 'type="password" name="token"' in refused.text
        assert client.get("/", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200

        entry = client.get("/queues/emails?token=s3cret&state=failed")
        assert entry.status_code == 303
        assert entry.headers["location"] == "/queues/emails?state=failed"
        cookie = entry.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        value = client.cookies["alkstore_token"]
        assert "s3cret" not in value  # a keyed hash, no bearer token
        bearer = {"Authorization": f"Bearer {value}"}
        assert httpx.get(f"{url}/", headers=bearer).status_code == 401
        page = client.get(entry.headers["location"])
        assert page.status_code == 200 and "Queue emails" in page.text


def test_pages_carry_a_no_script_policy_and_unknown_things_are_404(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name)
    with serve(settings) as url, httpx.Client(base_url=url) as client:
        page = client.get("/")
        policy = page.headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "script-src" not in policy
        assert page.headers["X-Frame-Options"] == "DENY"
        assert client.get("/queues/nope").status_code == 404
        assert client.get("/queues/emails/jobs/not-an-id").status_code == 400
        missing = "/queues/emails/jobs/00000000-0000-0000-0000-000000000000"
        assert client.get(missing).status_code == 404


def test_the_auto_refresh_never_points_at_another_site(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name)
    with serve(settings) as url:
        # Sent as is (an HTTP client would read "//evil.example" as a host): a refresh URL
        # made of this path would be a link to the host it names.
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=20) as sock:
            sock.sendall(b"GET //evil.example/?refresh=5 HTTP/1.1\r\nHost: x\r\n")
            sock.sendall(b"Connection: close\r\n\r\n")
            answer = b"".join(iter(lambda: sock.recv(65536), b"")).decode()
        assert 'content="5; url=/evil.example/?refresh=5"' in answer
        assert "//evil.example" not in answer


def test_the_job_page_shows_the_attempt_history(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    installed.update_queue("emails", retry_limit=1)
    job_id = installed.send("emails", 1)
    for message in ("<b>first</b>", "second"):
        (job,) = installed.fetch("emails", ignore_start_after=True)
        try:
            raise ValueError(message)
        except ValueError as exc:
            installed.fail("emails", job, exc)
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name)
    with serve(settings) as url, httpx.Client(base_url=url) as client:
        page = client.get(f"/queues/emails/jobs/{job_id}")
    assert page.status_code == 200
    history = page.text[page.text.index('id="attempts"') :]
    rows = re.findall(r"<tr><td>(\d+)</td>", history)
    assert rows == ["1", "2"]
    assert "ValueError</b>: &lt;b&gt;first&lt;/b&gt;" in history  # escaped
    assert "second" in history and history.count('<pre class="stack">') == 2


def test_it_never_creates_a_schema(pg_dsn: str, schema_name: str) -> None:
    app = create_app(DashboardSettings(dsn=pg_dsn, schema=schema_name))

    async def start() -> None:
        async with app.router.lifespan_context(app):
            pass

    with pytest.raises(DashboardError, match="not installed"):
        asyncio.run(start())
    with alkstore.connect(pg_dsn, schema=schema_name, migrate=False) as store:
        assert store.schema_version() is None


def test_the_command_binds_localhost_and_takes_its_token_from_the_environment(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    command = [sys.executable, "-m", "alkstore.cli", "dashboard", "--dsn", pg_dsn]
    command += ["--schema", schema_name, "--port", "0", "--read-only"]
    env = {**os.environ, "ALKSTORE_DASHBOARD_TOKEN": "from-env", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stderr is not None
        started = re.compile(r"Uvicorn running on (http://\S+)")
        lines = []
        for line in process.stderr:  # ends when the process does: a failed start fails here
            lines.append(line)
            found = started.search(line)
            if found:
                break
        assert found, "".join(lines)
        url = found.group(1)
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url, timeout=10).status_code == 401
        page = httpx.get(url, headers={"Authorization": "Bearer from-env"}, timeout=10)
        assert page.status_code == 200 and "read-only" in page.text
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_settings_refuse_an_empty_token_and_a_zero_sampling_interval() -> None:
    with pytest.raises(ValueError, match="token"):
        DashboardSettings(dsn="postgresql://x/y", token="")
    with pytest.raises(ValueError, match="sample_seconds"):
        DashboardSettings(dsn="postgresql://x/y", sample_seconds=0)
    assert "s3cret" not in repr(DashboardSettings(dsn="postgresql://x/y", token="s3cret"))


def test_a_queue_name_with_a_slash_opens_and_its_actions_work(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    installed.create_queue("team/emails")
    job_id = installed.send("team/emails", {"n": 1})
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name)
    with serve(settings) as url, httpx.Client(base_url=url) as client:
        for path in ("/queues/team/emails", "/queues/team%2Femails"):
            page = client.get(path)
            assert page.status_code == 200 and "Queue team/emails" in page.text, path
        job = client.get(f"/queues/team/emails/jobs/{job_id}")
        assert job.status_code == 200 and str(job_id) in job.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', job.text)
        assert csrf is not None
        done = client.post(f"/queues/team/emails/jobs/{job_id}/cancel", data={"csrf": csrf[1]})
        assert done.status_code == 303
        assert done.headers["location"] == f"/queues/team/emails/jobs/{job_id}?done=cancel+1"
        paused = client.post("/queues/team/emails/pause", data={"csrf": csrf[1]})
        assert paused.status_code == 303
    assert installed.get_job("team/emails", job_id).state == alkstore.JobState.CANCELLED
    assert installed.get_queue("team/emails").paused


def test_an_invalid_queue_name_is_400_and_done_shows_only_the_servers_words(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name)
    with serve(settings) as url, httpx.Client(base_url=url) as client:
        bad = client.get("/queues/%3Cscript%3E")
        assert bad.status_code == 400 and "Traceback" not in bad.text
        assert "&lt;script&gt;" in bad.text and "<script>" not in bad.text
        spoofed = client.get("/queues/emails", params={"done": "your account is locked"})
        assert spoofed.status_code == 200 and "account" not in spoofed.text
        assert 'class="done"' not in spoofed.text
        real = client.get("/queues/emails", params={"done": "pause 1"})
        assert '<p class="done" role="status">Done: pause 1</p>' in real.text


def _start(*argv: str, token: str | None = None) -> tuple[subprocess.Popen[str], str, list[str]]:
    """``alkstore dashboard ARGV --port 0`` with stdout and stderr on one pipe, read until it
    serves: (the process, its URL, the lines it printed so far)."""
    command = [sys.executable, "-m", "alkstore.cli", "dashboard", *argv, "--port", "0"]
    env = {k: v for k, v in os.environ.items() if k != "ALKSTORE_DASHBOARD_TOKEN"}
    env.update({"PYTHONUNBUFFERED": "1"} | ({"ALKSTORE_DASHBOARD_TOKEN": token} if token else {}))
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:  # ends when the process does: a failed start fails here
        lines.append(line)
        found = re.search(r"Uvicorn running on http://\S+:(\d+)", line)
        if found:
            return process, f"http://127.0.0.1:{found[1]}", lines
    process.wait(timeout=20)
    raise AssertionError("".join(lines))


def _stop(process: subprocess.Popen[str]) -> str:
    """Stop the dashboard; what it printed after it started serving."""
    process.terminate()
    out, _ = process.communicate(timeout=20)
    return out


def test_the_token_stays_out_of_the_access_log(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    process, url, _ = _start("--dsn", pg_dsn, "--schema", schema_name, token="t0ken-xyz")
    try:
        with httpx.Client(base_url=url) as client:
            entry = client.get("/queues/emails?token=t0ken-xyz&state=failed")
            assert entry.status_code == 303
            assert entry.headers["location"] == "/queues/emails?state=failed"
            assert client.get(entry.headers["location"]).status_code == 200
    finally:
        log = _stop(process)
    assert '"GET /queues/emails?token=***&state=failed HTTP/1.1" 303' in log, log
    assert "t0ken-xyz" not in log


def test_the_cookie_is_secure_over_https(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name, token="s3cret")
    with serve(settings) as url, httpx.Client(base_url=url) as client:
        plain = client.get("/?token=s3cret").headers["set-cookie"].lower()
        client.cookies.clear()
        # uvicorn takes the scheme from a proxy on 127.0.0.1 (its forwarded_allow_ips)
        https = client.get("/?token=s3cret", headers={"X-Forwarded-Proto": "https"})
    assert "secure" not in plain.split("; ")
    cookie = https.headers["set-cookie"].lower().split("; ")
    assert {"secure", "httponly", "samesite=strict"} <= set(cookie)


def test_serving_beyond_localhost_without_a_token_warns(
    installed: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    where = ("--dsn", pg_dsn, "--schema", schema_name, "--host", "0.0.0.0")
    process, _, lines = _start(*where)
    _stop(process)
    assert (
        "alkstore dashboard: warning: serving on 0.0.0.0 without a token: anyone who can reach"
        " it can see and change every job (set --token or $ALKSTORE_DASHBOARD_TOKEN)\n"
    ) in lines
    process, _, lines = _start(*where, token="t")
    _stop(process)
    assert not any("warning" in line for line in lines)


def test_a_missing_schema_is_one_line(pg_dsn: str, schema_name: str) -> None:
    command = [sys.executable, "-m", "alkstore.cli", "dashboard", "--dsn", pg_dsn]
    command += ["--schema", schema_name, "--port", "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"alkstore dashboard: schema {schema_name!r} is not installed in that database"
        " (alkstore migrate installs it; the dashboard never does)\n"
    )
