"""The admin commands (``queues``, ``queue``, ``stats``, ``jobs``, ``job``, ``retry``, ``cancel``,
``resume``, ``delete``, ``redrive``, ``migrate``) against the run's real PostgreSQL.

They run in-process through :func:`alkstore.cli.main`, as the console script does; one test
runs the installed ``alkstore`` script with its output piped.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pty
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore import cli


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich wraps at COLUMNS when output is not a terminal: keep lines whole for matching."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def store(pg_dsn: str, schema_name: str) -> Iterator[alkstore.Store]:
    with alkstore.connect(pg_dsn, schema=schema_name) as opened:
        yield opened


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``alkstore ARGV``: (exit status, stdout, stderr)."""
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    status, out, err = run(capsys, *argv, "--json")
    assert status == 0, err
    return json.loads(out)


def _schema_exists(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        return found.fetchone() is not None


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"alkstore {alkstore_version()}"


def alkstore_version() -> str:
    from importlib.metadata import version

    return version("alkstore")


@pytest.mark.parametrize(
    "argv",
    [
        ["queues"],
        ["queue", "q"],
        ["stats"],
        ["jobs", "q"],
        ["job", "q", "0190b6d2-0000-7000-8000-000000000000"],
        ["cancel", "q", "0190b6d2-0000-7000-8000-000000000000"],
        ["redrive", "q"],
    ],
    ids=lambda argv: argv[0],
)
def test_commands_never_create_a_schema(
    argv: list[str], pg_dsn: str, schema_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, *argv, "--dsn", pg_dsn, "--schema", schema_name)
    assert status == 1
    assert err == f"alkstore {argv[0]}: schema {schema_name!r} is not installed in that " + (
        "database (alkstore migrate installs it)\n"
    )
    assert out == ""
    assert not _schema_exists(pg_dsn, schema_name)


def test_an_unreachable_server_is_one_line_and_debug_shows_the_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{_closed_port()}/x"
    status, out, err = run(capsys, "queues", "--dsn", dsn)
    assert status == 1 and out == ""
    assert err.startswith("alkstore queues: ") and "could not reach the database" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    with pytest.raises(alkstore.ConnectionFailed):
        cli.main(["queues", "--dsn", dsn, "--debug"])
    with pytest.raises(alkstore.ConnectionFailed):
        cli.main(["--debug", "queues", "--dsn", dsn])


def test_queues_queue_and_stats(
    store: alkstore.Store, pg_dsn: str, schema_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.create_queue("dead")
    store.create_queue("q", retry_limit=0, dead_letter="dead")
    store.send_many("q", [{"data": i} for i in range(3)])
    store.fetch("q")
    where = ("--dsn", pg_dsn, "--schema", schema_name)

    queues = run_json(capsys, "queues", *where)
    assert [q["name"] for q in queues] == ["dead", "q"]
    q = queues[1]
    assert q["options"]["dead_letter"] == "dead" and q["options"]["retry_limit"] == 0
    assert q["counts"] == {
        "created": 2,
        "retry": 0,
        "active": 1,
        "completed": 0,
        "cancelled": 0,
        "failed": 0,
    }
    assert (q["queued"], q["total"]) == (2, 3)
    one = run_json(capsys, "queue", "q", *where)
    assert one.pop("oldest_queued_seconds") >= q.pop("oldest_queued_seconds") >= 0
    assert one == q

    stats = run_json(capsys, "stats", "q", *where)
    assert [(s["queue"], s["queued"], s["total"]) for s in stats] == [("q", 2, 3)]
    assert stats[0]["oldest_queued_seconds"] >= 0
    assert [s["queue"] for s in run_json(capsys, "stats", *where)] == ["dead", "q"]
    status, _, err = run(capsys, "stats", "q", "nope", *where)
    assert status == 1 and err == "alkstore stats: queue 'nope' does not exist\n"

    status, out, _ = run(capsys, "queues", *where)
    assert status == 0 and "dead" in out and "q" in out
    status, out, _ = run(capsys, "queue", "q", *where)
    assert status == 0 and "dead_letter" in out
    status, _, err = run(capsys, "queue", "nope", *where)
    assert status == 1 and err == f"alkstore queue: no queue 'nope' in schema {schema_name!r}\n"


def test_jobs_pages_by_state_and_job_shows_one(
    store: alkstore.Store, pg_dsn: str, schema_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.create_queue("q")
    ids = [str(i) for i in store.send_many("q", [{"data": {"n": i}} for i in range(5)])]
    (active,) = store.fetch("q")
    where = ("--dsn", pg_dsn, "--schema", schema_name)

    page = run_json(capsys, "jobs", "q", "--state", "created", "--limit", "2", *where)
    assert [j["state"] for j in page["jobs"]] == ["created", "created"]
    assert page["next_after"] == page["jobs"][-1]["id"]
    after = page["next_after"]
    rest = run_json(capsys, "jobs", "q", "--state", "created", "--after", after, *where)
    assert rest["next_after"] is None
    listed = [j["id"] for j in page["jobs"] + rest["jobs"]]
    assert sorted(listed) == sorted(set(ids) - {str(active.id)})
    both = run_json(capsys, "jobs", "q", "--state", "active", "--state", "created", *where)
    assert len(both["jobs"]) == 5

    job = run_json(capsys, "job", "q", str(active.id), *where)
    assert job["id"] == str(active.id) and job["state"] == "active"
    assert job["data"] == active.data and job["started_on"] is not None

    status, out, _ = run(capsys, "jobs", "q", "--limit", "2", *where)
    assert status == 0 and "more: --after" in out and '{"n":' in out
    missing = "0190b6d2-0000-7000-8000-000000000000"
    status, _, err = run(capsys, "job", "q", missing, *where)
    assert status == 1 and err == f"alkstore job: no job {missing} in queue 'q'\n"
    status, _, err = run(capsys, "jobs", "nope", *where)
    assert status == 1 and "nope" in err and err.count("\n") == 1


def test_job_shows_the_attempt_history(
    store: alkstore.Store, pg_dsn: str, schema_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.create_queue("q", retry_limit=1)
    job_id = store.send("q", 1)
    for message in ("first [bold]try", "second try"):
        (job,) = store.fetch("q", ignore_start_after=True)
        try:
            raise ValueError(message)
        except ValueError as exc:
            store.fail("q", job, exc)
    where = ("--dsn", pg_dsn, "--schema", schema_name)

    errors = run_json(capsys, "job", "q", str(job_id), *where)["errors"]
    assert [(e["attempt"], e["name"], e["message"]) for e in errors] == [
        (1, "ValueError", "first [bold]try"),
        (2, "ValueError", "second try"),
    ]
    assert "Traceback" in errors[0]["stack"] and errors[0]["at"].endswith("+00:00")
    status, out, _ = run(capsys, "job", "q", str(job_id), *where)
    assert status == 0 and "attempt history" in out
    history = out[out.index("attempt history") :]
    assert "ValueError" in history and "first [bold]try" in history and "second try" in history


def test_cancel_resume_retry_delete_and_redrive(
    store: alkstore.Store, pg_dsn: str, schema_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.create_queue("dead")
    store.create_queue("q", retry_limit=0, dead_letter="dead")
    a, b = store.send_many("q", [{"data": 1}, {"data": 2}])
    where = ("--dsn", pg_dsn, "--schema", schema_name)

    cancelled = run_json(capsys, "cancel", "q", str(a), str(b), *where)
    assert cancelled == {"queue": "q", "requested": 2, "cancelled": 2}
    assert run_json(capsys, "resume", "q", str(a), *where)["resumed"] == 1
    assert store.get_job("q", a).state == alkstore.JobState.CREATED
    (job,) = store.fetch("q")
    store.fail("q", [job], "boom")  # no retries left: failed, and a dead letter
    assert run_json(capsys, "retry", "q", str(a), str(b), *where) == {
        "queue": "q",
        "requested": 2,
        "retried": 1,
    }
    assert store.get_job("q", a).state == alkstore.JobState.RETRY
    status, out, _ = run(capsys, "delete", "q", str(b), *where)
    assert (status, out.strip()) == (0, "deleted 1 of 1 jobs in queue 'q'")
    assert store.get_job("q", b) is None

    assert run_json(capsys, "redrive", "dead", *where) == {"queue": "dead", "redriven": 1}
    assert len(store.list_jobs("q")) == 2  # a, and a's dead letter back in q


def test_migrate_dry_run_prints_the_sql_and_changes_nothing(
    pg_dsn: str, schema_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ("--dsn", pg_dsn, "--schema", schema_name)
    status, out, err = run(capsys, "migrate", "--dry-run", *where)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"-- schema {schema_name!r}: not installed -> version ")
    assert any(line.startswith(f'CREATE TABLE "{schema_name}".job') for line in lines)
    assert not _schema_exists(pg_dsn, schema_name)

    document = run_json(capsys, "migrate", "--dry-run", *where)
    assert document["from"] is None and document["dry_run"] is True
    assert document["to"] >= 1 and document["statements"]
    assert not _schema_exists(pg_dsn, schema_name)

    assert run_json(capsys, "migrate", *where) == {
        "schema": schema_name,
        "from": None,
        "to": document["to"],
        "dry_run": False,
    }
    status, out, _ = run(capsys, "migrate", "--dry-run", *where)
    assert out.strip() == (
        f"schema {schema_name!r} is at version {document['to']}, the latest: nothing to do"
    )
    with alkstore.connect(pg_dsn, schema=schema_name, migrate=False) as store:
        assert store.queues() == []


def test_piped_output_is_plain_text(store: alkstore.Store, pg_dsn: str, schema_name: str) -> None:
    store.create_queue("q")
    store.send("q", {"markup": "[bold]x[/bold]"})
    # The console script of the interpreter running the tests (its bin/ need not be on PATH).
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "alkstore.cli",
            "jobs",
            "q",
            "--dsn",
            pg_dsn,
            "--schema",
            schema_name,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "\x1b" not in done.stdout and "\r" not in done.stdout
    assert "[bold]x[/bold]" in done.stdout


def test_every_admin_command_is_registered_and_the_dsn_may_come_from_the_environment(
    store: alkstore.Store,
    pg_dsn: str,
    schema_name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    commands = cli.build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    admin = {"queues", "queue", "stats", "jobs", "job", "retry", "cancel", "resume", "delete"}
    assert admin | {"redrive", "migrate"} <= set(commands)
    store.create_queue("q")
    monkeypatch.setenv("ALKSTORE_DSN", pg_dsn)
    assert [q["name"] for q in run_json(capsys, "queues", "--schema", schema_name)] == ["q"]


def _piped(*argv: str) -> subprocess.Popen[str]:
    """``alkstore ARGV`` as the console script runs it, stdout and stderr pipes, with no
    ``COLUMNS`` in its environment (as in a pipeline)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    command = [sys.executable, "-m", "alkstore.cli", *argv]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_piped_output_keeps_whole_values(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    name = "payments-settlement-" + "x" * 60
    store.create_queue(name)
    data = {"note": "a long note " * 10}
    job_id = store.send(name, data)
    where = ("--dsn", pg_dsn, "--schema", schema_name)
    for argv in (("queues",), ("stats",)):
        out, err = _piped(*argv, *where).communicate(timeout=60)
        assert err == "" and name in out, out
    whole = json.dumps(data, separators=(",", ":"))
    for argv in (("jobs", name), ("job", name, str(job_id))):
        out, err = _piped(*argv, *where).communicate(timeout=60)
        assert err == "" and str(job_id) in out and whole in out, out


@pytest.mark.parametrize("output", [(), ("--json",)], ids=["table", "json"])
def test_a_closed_pipe_ends_quietly(
    output: tuple[str, ...], store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    store.create_queue("q")
    process = _piped("queues", *output, "--dsn", pg_dsn, "--schema", schema_name)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # as `| head` does once it has its lines, before any is written
    err = process.stderr.read()
    assert err == ""
    assert process.wait(timeout=60) == 1


def test_errors_say_it_once_and_an_unknown_flag_shows_the_subcommands_usage(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    where = ("--dsn", pg_dsn, "--schema", schema_name)
    process = _piped("stats", "nope", *where)
    assert process.communicate(timeout=60) == ("", "alkstore stats: queue 'nope' does not exist\n")
    assert process.returncode == 1

    for command in (("queues",), ("bench", "wal")):
        process = _piped(*command, "--dsn", pg_dsn, "--bogus")
        out, err = process.communicate(timeout=60)
        assert process.returncode == 2 and out == ""
        assert err.startswith(f"usage: alkstore {' '.join(command)} "), err
        assert err.endswith("error: unrecognized arguments: --bogus\n")


def test_redrive_of_a_queue_that_is_no_dead_letter_queue_is_an_error(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    store.create_queue("dead")
    store.create_queue("payments", dead_letter="dead")
    store.send("payments", {"n": 1})
    process = _piped("redrive", "payments", "--dsn", pg_dsn, "--schema", schema_name)
    out, err = process.communicate(timeout=60)
    assert (process.returncode, out) == (1, "")
    assert err == (
        "alkstore redrive: queue 'payments' is no queue's dead-letter queue: nothing was"
        " redriven (did you mean 'dead'?)\n"
    )
    assert store.queue_stats("payments").queued == 1
    process = _piped("redrive", "dead", "--dsn", pg_dsn, "--schema", schema_name)
    assert process.communicate(timeout=60) == ("redrove 0 jobs from 'dead'\n", "")


def test_pause_and_resume_a_queue_and_list_and_remove_schedules(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    store.create_queue("reports")
    store.schedule("reports", "0 3 * * *", {"kind": "nightly"}, tz="Europe/Paris", key="n")
    where = ("--dsn", pg_dsn, "--schema", schema_name)

    assert _piped("pause-queue", "reports", *where).communicate(timeout=60) == (
        "queue 'reports' is paused\n",
        "",
    )
    assert store.get_queue("reports").paused  # type: ignore[union-attr]
    out, err = _piped("resume-queue", "reports", "--json", *where).communicate(timeout=60)
    assert json.loads(out) == {"queue": "reports", "paused": False} and err == ""
    assert not store.get_queue("reports").paused  # type: ignore[union-attr]
    process = _piped("pause-queue", "nope", *where)
    assert process.communicate(timeout=60) == (
        "",
        "alkstore pause-queue: queue 'nope' does not exist\n",
    )

    out, err = _piped("schedules", *where).communicate(timeout=60)
    assert (
        err == "" and "0 3 * * *" in out and "Europe/Paris" in out and '{"kind":"nightly"}' in out
    )
    (listed,) = json.loads(_piped("schedules", "--json", *where).communicate(timeout=60)[0])
    assert (listed["name"], listed["key"], listed["cron"]) == ("reports", "n", "0 3 * * *")
    process = _piped("unschedule", "reports", *where)
    assert process.communicate(timeout=60) == (
        "",
        "alkstore unschedule: no schedule of queue 'reports' with key ''\n",
    )
    assert process.returncode == 1
    assert _piped("unschedule", "reports", "--key", "n", *where).communicate(timeout=60) == (
        "removed the schedule of queue 'reports' with key 'n'\n",
        "",
    )
    assert store.schedules() == []


def test_pause_resume_and_trigger_a_schedule_and_its_next_run(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    store.create_queue("reports")
    store.schedule("reports", "0 3 * * *", {"kind": "nightly"}, key="n")
    where = ("--dsn", pg_dsn, "--schema", schema_name)
    (listed,) = json.loads(_piped("schedules", "--json", *where).communicate(timeout=60)[0])
    next_run = dt.datetime.fromisoformat(listed["next_run"])
    assert (next_run.hour, next_run.minute) == (3, 0) and listed["paused_on"] is None
    out, err = _piped("schedules", *where).communicate(timeout=60)
    assert err == "" and next_run.strftime("%Y-%m-%d 03:00:00") in out

    assert _piped("pause-schedule", "reports", "--key", "n", *where).communicate(timeout=60) == (
        "the schedule of queue 'reports' with key 'n' is now paused\n",
        "",
    )
    (paused,) = store.schedules()
    assert paused.paused_on is not None
    out, _err = _piped("schedules", *where).communicate(timeout=60)
    assert "paused" in out
    (listed,) = json.loads(_piped("schedules", "--json", *where).communicate(timeout=60)[0])
    assert listed["next_run"] is None and listed["paused_on"] is not None

    out, err = _piped("trigger-schedule", "reports", "--key", "n", "--json", *where).communicate(
        timeout=60
    )
    sent = json.loads(out)["id"]
    job = store.get_job("reports", sent)
    assert err == "" and job is not None and job.data == {"kind": "nightly"}

    out, err = _piped("resume-schedule", "reports", "--key", "n", *where).communicate(timeout=60)
    assert (out, err) == (
        "the schedule of queue 'reports' with key 'n' fires again from its next slot\n",
        "",
    )
    assert store.schedules()[0].paused_on is None
    for verb in ("pause-schedule", "resume-schedule", "trigger-schedule"):
        process = _piped(verb, "reports", *where)
        assert process.communicate(timeout=60) == (
            "",
            f"alkstore {verb}: queue 'reports' has no schedule with key ''\n",
        )
        assert process.returncode == 1


def test_purge_asks_on_a_terminal_and_needs_yes_when_piped(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    store.create_queue("q", retry_limit=0)
    ids = store.send_many("q", [{"data": n} for n in range(4)])
    fetched = store.fetch("q", batch_size=3)
    store.complete("q", fetched[0])
    store.fail("q", fetched[1], "boom")
    where = ("--dsn", pg_dsn, "--schema", schema_name)

    process = _piped("purge", "q", "--state", "completed,failed", *where)
    assert process.communicate(timeout=60) == (
        "",
        "alkstore purge: refusing to delete 2 jobs of queue 'q' (1 completed, 1 failed)"
        " without --yes: stdin is not a terminal to confirm on\n",
    )
    assert process.returncode == 1 and store.queue_stats("q").total == 4

    for answer, deleted in (("n", 0), ("y", 2)):
        leader, follower = pty.openpty()
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        command = [sys.executable, "-m", "alkstore.cli", "purge", "q", "--state", "failed"]
        terminal = subprocess.Popen(
            [*command, "--state", "completed", *where],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        os.close(follower)
        os.write(leader, f"{answer}\n".encode())
        out, err = terminal.communicate(timeout=60)
        os.close(leader)
        assert out.startswith("delete 2 jobs of queue 'q' (1 completed, 1 failed)? [y/N] ")
        assert store.queue_stats("q").total == 4 - deleted
    assert err == "" and out.endswith("deleted 2 jobs of queue 'q' in states completed,failed\n")

    argv = ("purge", "q", "--state", "created", "--state", "active", "--yes", "--json")
    out, err = _piped(*argv, *where).communicate(timeout=60)
    assert json.loads(out) == {"queue": "q", "states": ["active", "created"], "deleted": 2}
    assert store.list_jobs("q") == [] and err == "" and len(ids) == 4
    process = _piped("purge", "q", "--state", "done", "--yes", *where)
    assert process.communicate(timeout=60)[1].startswith("alkstore purge: --state 'done': job")
    # Refused even with nothing to delete, where the store is never asked.
    process = _piped("purge", "q", "--state", "failed", "--batch-size", "0", "--yes", *where)
    assert (
        process.communicate(timeout=60)[1] == "alkstore purge: --batch-size 0: must be at least 1\n"
    )
    assert process.returncode != 0


def test_create_and_update_a_queue_with_options(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    where = ("--dsn", pg_dsn, "--schema", schema_name)
    assert _piped("create-queue", "email.dead", *where).communicate(timeout=60)[1] == ""
    argv = ("create-queue", "email", "--set", "retry_limit=5", "--set", "dead_letter=email.dead")
    out, err = _piped(*argv, "--json", *where).communicate(timeout=60)
    assert err == "" and json.loads(out)["options"]["dead_letter"] == "email.dead"
    queue = store.get_queue("email")
    assert queue is not None and queue.options.retry_limit == 5

    out, err = _piped("update-queue", "email", "--set", "retry_backoff=true", *where).communicate(
        timeout=60
    )
    assert err == "" and out.startswith("updated queue 'email': ") and "retry_backoff=true" in out
    assert store.get_queue("email").options.retry_backoff is True  # type: ignore[union-attr]

    for argv, message in (
        (("update-queue", "email", "--set", "retry_limit=x"), "retry_limit='x': must be"),
        (("update-queue", "email", "--set", "bogus=1"), "bogus=1: unknown option"),
        (("update-queue", "email"), "nothing to update: give at least one --set"),
        (("create-queue", "email"), "queue 'email' already exists"),
        (("create-queue", "x", "--set", "retry_limit"), "--set 'retry_limit': expected NAME=VALUE"),
    ):
        process = _piped(*argv, *where)
        out, err = process.communicate(timeout=60)
        assert (process.returncode, out) == (1, "")
        assert err.startswith(f"alkstore {argv[0]}: {message}"), err
    assert store.get_queue("x") is None
    assert store.get_queue("email").options.retry_limit == 5  # type: ignore[union-attr]
