"""The dashboard in a real headless Chromium (Debian's package, driven by Playwright) against
the test PostgreSQL: pages show the stored jobs, actions change the database, job data stays
inert, and each page's screenshot is saved for docs/dashboard.md."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import playwright.sync_api as playwright_api
import pytest

import alkstore
from alkstore.conformance.packages import PackageUnavailable
from alkstore.core.states import JobState
from alkstore.dashboard import DashboardSettings
from dashboard_support import Seeded, find_chromium, seed, serve

DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Debian chromium (installed when missing; skipped only where it cannot be)."""
    try:
        executable = find_chromium()
    except PackageUnavailable as exc:
        pytest.skip(str(exc))
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(executable), headless=True)
        yield browser
        browser.close()


@pytest.fixture
def store(pg_dsn: str, schema_name: str) -> Iterator[alkstore.Store]:
    """A store on a fresh schema (the test, not the dashboard, installs it)."""
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        yield store


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page that records every dialog a script on it would open."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    context.close()


def shot(page: Any, name: str) -> None:
    """Save the visible part of the page as docs/img/dashboard-NAME.png."""
    DOCS_IMG.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS_IMG / f"dashboard-{name}.png"))


def state_of(store: alkstore.Store, queue: str, job_id: Any) -> JobState | None:
    job = store.get_job(queue, job_id)
    return None if job is None else job.state


def test_pages_and_actions(page: Any, store: alkstore.Store, pg_dsn: str, schema_name: str) -> None:
    jobs: Seeded = seed(store)
    expect = playwright_api.expect
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name, sample_seconds=0.1)
    with serve(settings) as url:
        # Queues: counts per state; the throughput chart draws the jobs a worker completes
        # between the dashboard's samples.
        deadline = time.monotonic() + 30  # a guard only: a loaded machine samples late
        page.goto(url)
        reports_line = page.locator("tr", has=page.get_by_role("link", name="reports", exact=True))
        line = reports_line.locator("polyline.completed")
        seen = None
        for batch in range(4):
            store.complete("reports", store.fetch("reports", batch_size=2 + batch * 3))
            while line.count() == 0 or line.get_attribute("points") == seen:  # a new sample
                assert time.monotonic() < deadline, "the throughput chart never moved"
                page.reload()
            seen = line.get_attribute("points")
        # The chart's axes: 0 and its top on the y axis, the first and last sample's time
        # (UTC) on the x axis.
        spark = reports_line.locator("svg.spark")
        expect(spark.locator("line.axis")).to_have_count(2)
        expect(spark.locator("text.y-zero")).to_have_text("0")
        assert int(spark.locator("text.y-top").text_content() or "0") >= 2
        for end in ("x-start", "x-end"):
            expect(spark.locator(f"text.{end}")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
        emails = page.locator("tr", has=page.get_by_role("link", name="emails", exact=True))
        expect(emails.locator("td[data-state=created]")).to_have_text("2")
        expect(emails.locator("td[data-state=completed]")).to_have_text("1")
        expect(emails.locator("td[data-state=failed]")).to_have_text("1")
        shot(page, "queues")

        # A queue's jobs, filtered by state, paged by keyset.
        page.get_by_role("link", name="reports", exact=True).click()
        expect(page.locator("h1")).to_have_text("Queue reports")
        expect(page.locator("tbody tr")).to_have_count(50)
        first_page = page.locator("tbody tr td a.mono").all_inner_texts()
        expect(page.get_by_role("button", name="Redrive")).to_have_count(0)  # not a DLQ
        shot(page, "jobs")
        page.get_by_role("link", name="Next page").click()
        second_page = page.locator("tbody tr td a.mono").all_inner_texts()
        assert len(second_page) == 50 and not set(first_page) & set(second_page)
        page.get_by_role("link", name="Next page").click()
        expect(page.locator("tbody tr")).to_have_count(20)
        expect(page.get_by_role("link", name="Next page")).to_have_count(0)

        page.goto(f"{url}/queues/emails")
        page.get_by_label("failed").check()
        page.get_by_role("button", name="Filter").click()
        expect(page.locator("tbody tr")).to_have_count(1)
        expect(page.locator("tbody tr a.mono")).to_have_text(str(jobs.failed))

        # A failed job: its error with the stack, and its attempt history (one failed
        # attempt, its stack folded); Retry makes it ready to run again.
        page.locator("tbody tr a.mono").click()
        expect(page.locator("pre.stack").first).to_contain_text(
            "SMTPError: 550 mailbox unavailable"
        )
        history = page.locator("details pre.stack")
        expect(history).to_have_count(1)
        expect(history).not_to_be_visible()
        page.get_by_text("stack", exact=True).click()
        expect(history).to_contain_text("SMTPError: 550 mailbox unavailable")
        shot(page, "job-failed")
        expect(page.get_by_role("button", name="Cancel")).to_have_count(0)  # not failed jobs
        # It links to its dead-letter copy, which links back.
        copy_link = page.locator("#dead-letter a.mono")
        expect(copy_link).to_have_text(str(jobs.dead))
        copy_link.click()
        expect(page.locator("h1")).to_contain_text(str(jobs.dead))
        page.go_back()
        page.get_by_role("button", name="Retry").click()
        expect(page.locator(".done")).to_have_text("Done: retry 1")
        assert state_of(store, "emails", jobs.failed) == JobState.RETRY

        # The dead letter it left: lineage back to the source job; redrive sends it back.
        page.goto(f"{url}/queues/emails_dlq/jobs/{jobs.dead}")
        expect(page.locator("a.mono", has_text=str(jobs.failed))).to_be_visible()
        shot(page, "job-dead-letter")
        page.goto(f"{url}/queues/emails_dlq")
        page.get_by_role("button", name="Redrive").click()
        expect(page.locator(".done")).to_have_text("Done: redrive 1")
        assert store.list_jobs("emails_dlq") == []

        # Cancel, resume and delete a queued job.
        page.goto(f"{url}/queues/emails/jobs/{jobs.queued}")
        page.get_by_role("button", name="Cancel").click()
        expect(page.locator(".done")).to_have_text("Done: cancel 1")
        assert state_of(store, "emails", jobs.queued) == JobState.CANCELLED
        page.get_by_role("button", name="Resume").click()
        expect(page.locator(".done")).to_have_text("Done: resume 1")
        assert state_of(store, "emails", jobs.queued) == JobState.CREATED
        # Delete asks first, on a page of its own (no script may ask): "No" keeps the job.
        page.get_by_role("link", name="Delete…").click()
        expect(page.locator("h1")).to_have_text(f"Delete job {jobs.queued} of queue emails?")
        shot(page, "job-delete-confirm")
        page.get_by_role("link", name="No, go back").click()
        expect(page.locator("h1")).to_contain_text(str(jobs.queued))
        assert state_of(store, "emails", jobs.queued) == JobState.CREATED
        page.get_by_role("link", name="Delete…").click()
        page.get_by_role("button", name="Yes, delete").click()
        expect(page.locator(".done")).to_have_text("Done: delete 1")
        assert state_of(store, "emails", jobs.queued) is None

        # A completed job shows its output.
        page.goto(f"{url}/queues/emails/jobs/{jobs.completed}")
        expect(page.locator("pre.data").last).to_contain_text('"message_id": "m-1"')
        shot(page, "job")

        # Untrusted data renders as text: no script ran, no dialog opened.
        page.goto(f"{url}/queues/emails/jobs/{jobs.script}")
        expect(page.locator("#job-data")).to_contain_text("<script>window.__pwned = 1;")
        page.goto(f"{url}/queues/emails")
        expect(page.locator("td.data", has_text="<script>")).to_have_count(1)
        assert page.evaluate("() => window.__pwned") is None
        assert page.dialogs == []

        # Schedules: the next run; pause, resume, run now, and remove (after a confirmation).
        page.goto(f"{url}/schedules")
        nightly = page.locator("tbody tr").first
        expect(nightly).to_contain_text("0 3 * * *")
        expect(nightly.locator(".next-run")).to_have_text(re.compile(r" 03:00:00 UTC$"))
        store.schedule("reports", "*/5 * * * *", {"report": "often"}, key="often")
        page.reload()
        often = page.locator("tr[data-schedule='reports/often']")
        often.get_by_role("button", name="Pause").click()
        expect(page.locator(".done")).to_have_text("Done: pause 1")
        expect(often.locator(".next-run")).to_have_text("paused")
        assert [s.paused_on is not None for s in store.schedules()] == [False, True]
        shot(page, "schedules")
        before = store.queue_stats("reports").total
        often.get_by_role("button", name="Run now").click()
        expect(page.locator(".done")).to_have_text("Done: trigger 1")
        assert store.queue_stats("reports").total == before + 1
        often.get_by_role("button", name="Resume").click()
        expect(page.locator(".done")).to_have_text("Done: resume 1")
        expect(often.locator(".next-run")).to_have_text(
            re.compile(r":[0-5]5:00 UTC$|:[0-5]0:00 UTC$")
        )
        often.get_by_role("link", name="Remove…").click()
        expect(page.locator("h1")).to_have_text(
            "Remove the schedule of queue reports with key 'often'?"
        )
        page.get_by_role("button", name="Yes, remove").click()
        expect(page.locator(".done")).to_have_text("Done: unschedule 1")
        assert [s.key for s in store.schedules()] == [""]
        expect(page.locator("tr[data-schedule='reports/often']")).to_have_count(0)

        # A POST without the page's CSRF token, or from another origin, changes nothing.
        target = f"{url}/queues/emails/jobs/{jobs.script}/cancel"
        assert page.request.post(target, form={"csrf": "guess"}).status == 403
        page.goto(f"{url}/queues/emails/jobs/{jobs.script}")
        csrf = page.locator("input[name=csrf]").first.get_attribute("value")
        foreign = page.request.post(
            target, form={"csrf": csrf}, headers={"Origin": "http://evil.example"}
        )
        assert foreign.status == 403
        assert state_of(store, "emails", jobs.script) == JobState.CREATED


def test_read_only_shows_no_action_and_refuses_them(
    page: Any, store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    jobs = seed(store)
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name, read_only=True)
    with serve(settings) as url:
        page.goto(f"{url}/queues/emails/jobs/{jobs.queued}")
        playwright_api.expect(page.locator(".badge")).to_have_text("read-only")
        assert page.locator("form[method=post]").count() == 0
        assert page.get_by_role("link", name="Delete…").count() == 0
        confirm = page.request.get(f"{url}/queues/emails/jobs/{jobs.queued}/delete")
        assert confirm.status == 405
        response = page.request.post(f"{url}/queues/emails/jobs/{jobs.queued}/cancel")
        assert response.status == 403
        assert state_of(store, "emails", jobs.queued) == JobState.CREATED
        page.goto(f"{url}/queues/emails")  # no pause button, and a pause POST is refused
        assert page.locator("form[method=post]").count() == 0
        assert page.request.post(f"{url}/queues/emails/pause").status == 403
        assert store.get_queue("emails").paused is False  # type: ignore[union-attr]
        page.goto(f"{url}/schedules")  # no schedule action either
        assert page.locator("form[method=post]").count() == 0
        assert page.request.post(f"{url}/schedules/reports/pause", form={"key": ""}).status == 403
        assert store.schedules()[0].paused_on is None


def test_pause_resume_filters_and_flow_dependencies(
    page: Any, store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    expect = playwright_api.expect
    store.create_queue("orders")
    store.create_queue("invoices")
    store.send_many(
        "orders",
        [
            {"data": {"customer": f"c{n}", "note": "gift wrap" if n % 7 == 0 else "plain"}}
            | ({"singleton_key": "vip"} if n % 10 == 0 else {})
            for n in range(70)
        ],
    )
    flow = store.flow(
        [
            {"ref": "order", "queue": "orders", "data": {"customer": "flow"}},
            {"ref": "invoice", "queue": "invoices", "depends_on": ["order"], "data": {"n": 1}},
        ]
    )
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name)
    with serve(settings) as url:
        # Pause: the queue's page says so, the queues page marks it, and fetch hands out none.
        page.goto(f"{url}/queues/orders")
        expect(page.locator("#queue-paused")).to_have_count(0)
        page.get_by_role("button", name="Pause queue").click()
        expect(page.locator(".done")).to_have_text("Done: pause 1")
        expect(page.locator("#queue-paused")).to_be_visible()
        assert store.get_queue("orders").paused is True  # type: ignore[union-attr]
        assert store.fetch("orders") == []
        expect(page.get_by_role("button", name="Pause queue")).to_have_count(0)
        shot(page, "queue-paused")
        page.goto(url)
        orders = page.locator("tr", has=page.get_by_role("link", name="orders", exact=True))
        expect(orders.locator(".state.paused")).to_have_text("paused")
        page.goto(f"{url}/queues/orders")
        page.get_by_role("button", name="Resume queue").click()
        expect(page.locator(".done")).to_have_text("Done: resume 1")
        expect(page.locator("#queue-paused")).to_have_count(0)
        assert store.get_queue("orders").paused is False  # type: ignore[union-attr]

        # Filters: by singleton key, by text in data (case-insensitive), both kept by paging.
        page.get_by_label("key").fill("vip")
        page.get_by_role("button", name="Filter").click()
        expect(page.locator("tbody tr")).to_have_count(7)
        expect(page.locator("td.data", has_text='"c0"')).to_have_count(1)
        page.goto(f"{url}/queues/orders")
        page.get_by_label("text in data").fill("GIFT")
        page.get_by_role("button", name="Filter").click()
        expect(page.locator("tbody tr")).to_have_count(10)
        expect(page.locator("td.data").first).to_contain_text("gift wrap")
        shot(page, "jobs-filtered")
        page.get_by_label("key").fill("vip")
        page.get_by_role("button", name="Filter").click()
        expect(page.locator("tbody tr")).to_have_count(1)  # key vip and a gift: c0 only
        expect(page.locator("td.data")).to_contain_text('"c0"')

        # A flow's jobs: the child shows what it waits for, the parent what it is needed by.
        page.goto(f"{url}/queues/invoices/jobs/{flow['invoice']}")
        expect(page.locator("#flow")).to_contain_text("waits for")
        expect(page.locator("#flow a.mono")).to_have_text(str(flow["order"]))
        shot(page, "job-flow")
        page.locator("#flow a.mono").click()
        expect(page.locator("#flow")).to_contain_text("needed by")
        expect(page.locator("#flow a.mono")).to_have_text(str(flow["invoice"]))
        page.goto(f"{url}/queues/orders/jobs/{store.list_jobs('orders', limit=1)[0].id}")
        expect(page.locator("#flow")).to_have_count(0)  # not in a flow


def test_a_queue_named_with_a_slash_opens_and_links_cannot_put_words_in_its_mouth(
    page: Any, store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    expect = playwright_api.expect
    store.create_queue("team/emails")
    job_id = store.send("team/emails", {"to": "a@example.com"})
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name)
    with serve(settings) as url:
        page.goto(url)
        page.get_by_role("link", name="team/emails", exact=True).click()
        expect(page.locator("h1")).to_have_text("Queue team/emails")
        page.locator("tbody tr a.mono").click()
        page.get_by_role("button", name="Cancel").click()
        expect(page.locator(".done")).to_have_text("Done: cancel 1")
        assert state_of(store, "team/emails", job_id) == JobState.CANCELLED

        page.goto(f"{url}/queues/team%2Femails?done=Your+session+expired,+log+in+at+evil.example")
        expect(page.locator("h1")).to_have_text("Queue team/emails")
        expect(page.locator(".done")).to_have_count(0)

        response = page.goto(f"{url}/queues/%3Cscript%3E")
        assert response is not None and response.status == 400
        expect(page.locator("body")).to_contain_text("<script>")  # shown as text
        assert page.dialogs == []


def test_the_token_page_asks_for_the_token_and_opens_the_page(
    page: Any, store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    store.create_queue("emails")
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name, token="s3cret")
    with serve(settings) as url:
        response = page.goto(f"{url}/queues/emails?state=failed")
        assert response is not None and response.status == 401
        page.get_by_label("token").fill("wrong")
        page.get_by_role("button", name="Open").click()
        playwright_api.expect(page.locator("h1")).to_have_text("401")
        page.get_by_label("token").fill("s3cret")
        page.get_by_role("button", name="Open").click()
        playwright_api.expect(page.locator("h1")).to_have_text("Queue emails")
        assert page.url == f"{url}/queues/emails?state=failed"  # no token left in it
        playwright_api.expect(page.get_by_label("failed")).to_be_checked()


def test_auto_refresh_is_opt_in_and_keeps_the_page_and_its_filters(
    page: Any, store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    expect = playwright_api.expect
    store.create_queue("emails")
    store.send("emails", {"n": 1})
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name)
    with serve(settings) as url:
        page.goto(f"{url}/queues/emails?state=created")
        assert page.locator("meta[http-equiv=refresh]").count() == 0  # off unless asked
        expect(page.locator("#refresh b")).to_have_text("off")
        page.locator("#refresh").get_by_role("link", name="5s").click()
        expect(page.locator("#refresh b")).to_have_text("5s")
        assert page.url == f"{url}/queues/emails?state=created&refresh=5"
        created = page.locator("p.counts b").first
        expect(created).to_have_text("1")
        store.send("emails", {"n": 2})
        # The page reloads itself (no script: a meta refresh) and shows the new count,
        # with its filter and its refresh kept.
        expect(created).to_have_text("2", timeout=20_000)
        assert page.url == f"{url}/queues/emails?state=created&refresh=5"
        expect(page.get_by_label("created")).to_be_checked()
        page.locator("#refresh").get_by_role("link", name="off").click()
        assert page.url == f"{url}/queues/emails?state=created"
        assert page.locator("meta[http-equiv=refresh]").count() == 0
        assert page.dialogs == []


def test_the_workers_page_lists_the_processes_running_workers(
    page: Any, store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    expect = playwright_api.expect
    store.create_queue("emails")
    settings = DashboardSettings(dsn=pg_dsn, schema=schema_name)
    with serve(settings) as url:
        page.goto(f"{url}/workers")
        expect(page.locator("#processes tbody")).to_contain_text("No process runs workers")
        with store.work("emails", lambda job: None, poll_interval=0.05):
            deadline = time.monotonic() + 30
            while not store.worker_processes():
                assert time.monotonic() < deadline, "the worker's process was never recorded"
                time.sleep(0.05)
            page.reload()
            row = page.locator("#processes tbody tr")
            expect(row).to_have_count(1)
            expect(row.locator("td").nth(1)).to_have_text(str(os.getpid()))
            expect(row.get_by_role("link", name="emails")).to_be_visible()
            shot(page, "workers")
        page.reload()
        expect(page.locator("#processes tbody")).to_contain_text("No process runs workers")
