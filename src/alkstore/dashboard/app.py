"""The dashboard's ASGI app: pages over an :class:`~alkstore.AsyncStore`, actions as POSTs.

Pages: the queues with their counts (``/``), a queue's jobs filtered by state, singleton key
and text in data with keyset paging (``/queues/{queue}``), one job with its flow
dependencies, attempt history and dead-letter copy (``/queues/{queue}/jobs/{id}``), the
schedules with their next run (``/schedules``), the processes running workers
(``/workers``). Actions (retry, cancel, resume, delete a
job; pause or resume a queue; redrive a dead-letter queue; pause, resume, trigger or remove
a schedule) are POSTs carrying the process's CSRF token and go through the store's
operations only; ``read_only`` removes their forms and refuses them. The irreversible ones
(delete, remove) first show a confirmation page (a GET of the action's URL), since no
script may ask (the CSP allows none). ``?refresh=SECONDS`` makes a page reload itself (a
``<meta>`` refresh: no script either).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import uuid
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import attrs
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import alkstore
from alkstore.core.errors import InvalidOptions, QueueNotFound, ScheduleNotFound
from alkstore.core.ids import uuid7_at
from alkstore.core.records import Job, Queue
from alkstore.core.states import JobState, Operation, accepts
from alkstore.core.validation import check_queue_name

from .history import History, chart
from .security import GuardMiddleware, new_secret, same

JOB_ACTIONS = ("retry", "cancel", "resume", "delete")
"""What a job's page can do to it, each one store operation; its page offers those the job's
state accepts (core's transition table)."""

QUEUE_ACTIONS: dict[str, str] = {
    "redrive": "Redrive queued jobs to their source queue",
    "pause": "Pause queue",
    "resume": "Resume queue",
}
"""What a queue's page can do to it (name: button label), each one store operation run by
:func:`_queue_action`; the page offers those that apply (:func:`_queue_actions`)."""

SCHEDULE_ACTIONS: dict[str, str] = {
    "pause": "Pause",
    "resume": "Resume",
    "trigger": "Run now",
    "unschedule": "Remove",
}
"""What the schedules page can do to a schedule (name: button label), each one store
operation run by :func:`_schedule_action`."""

CONFIRMED = frozenset({"delete", "unschedule"})
"""The actions that cannot be undone: their button opens a confirmation page first."""

REFRESH_SECONDS = (5, 10, 30, 60)
"""The auto-refresh periods a page offers (``?refresh=…``); anything else is off."""

DEAD_LETTER_SCAN = 100
"""How many jobs of the dead-letter queue, from the failure's time on, a failed job's page
looks at for its copy (copies' ids are UUIDv7s of the time they were made)."""

PAGE_SIZE = 50
"""Jobs per page of a queue."""

SEARCH_SCAN = 10_000
"""The most jobs one filtered page looks at (``search_jobs(scan=…)``): a page filtered by
key or text reads at most this many rows of the queue, however rare the match."""


LOG = logging.getLogger(__name__)


class DashboardError(Exception):
    """The dashboard cannot start (its schema is not installed)."""


@attrs.frozen
class DashboardSettings:
    """Where the dashboard's store is and what it may do.

    ``read_only`` hides and refuses every action; ``token`` (when set) is required of every
    request; ``sample_seconds`` is how often queue counts are sampled for the throughput chart.
    The store is opened with ``migrate=False``: the dashboard never creates a schema.
    """

    dsn: str
    schema: str = "alkstore"
    engine: str | None = None
    driver: str = "psycopg"
    read_only: bool = False
    token: str | None = attrs.field(
        default=None,
        repr=False,  # a secret: kept out of logs and tracebacks
        validator=attrs.validators.optional(attrs.validators.min_len(1)),
    )
    sample_seconds: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))
    metrics: bool = False
    """Serve ``/metrics`` for Prometheus (:mod:`.metrics`; needs ``alkstore[metrics]``)."""


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("alkstore.dashboard", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    env.filters["when"] = _when
    env.filters["clock"] = _clock
    env.filters["age"] = _age
    env.filters["pretty"] = _pretty
    env.filters["brief"] = _brief
    return env


def _when(value: dt.datetime | None) -> str:
    return "" if value is None else value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _clock(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%H:%M:%S")


def _age(value: dt.timedelta | None) -> str:
    if value is None:
        return ""
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _brief(value: Any, width: int = 80) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


async def open_store(settings: DashboardSettings) -> alkstore.AsyncStore:
    """The store of ``settings``, never creating its schema: a schema that is not installed is
    a :class:`DashboardError`."""
    store = await alkstore.connect_async(
        settings.dsn,
        engine=settings.engine,
        driver=settings.driver,
        schema=settings.schema,
        migrate=False,
    )
    try:
        if await store.schema_version() is None:
            raise DashboardError(
                f"schema {settings.schema!r} is not installed in that database "
                "(alkstore migrate installs it; the dashboard never does)"
            )
    except BaseException:
        await store.close()
        raise
    return store


def create_app(settings: DashboardSettings) -> Starlette:
    """The dashboard as an ASGI app; it opens its store on startup and closes it on shutdown."""
    env = _env()
    csrf = new_secret()
    history = History()
    state: dict[str, alkstore.AsyncStore] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        store = await open_store(settings)
        state["store"] = store
        sampler = asyncio.create_task(_sample(store, history, settings.sample_seconds))
        try:
            yield
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            await store.close()

    def render(request: Request, template: str, **context: Any) -> HTMLResponse:
        body = env.get_template(template).render(
            request=request,
            csrf=csrf,
            read_only=settings.read_only,
            states=list(JobState),
            done=_done(request.query_params.get("done")),
            refresh=_refresh(request),
            **context,
        )
        return HTMLResponse(body)

    def store() -> alkstore.AsyncStore:
        return state["store"]

    async def queues_page(request: Request) -> Response:
        rows = []
        for queue in await store().queues():
            stats = await store().queue_stats(queue.name)
            rows.append((queue, stats, chart(history.points(queue.name))))
        return render(request, "queues.html", rows=rows)

    async def jobs_page(request: Request) -> Response:
        name = request.path_params["queue"]
        queue = await store().get_queue(name)
        if queue is None:
            raise HTTPException(404, f"no queue {name!r}")
        chosen = [s for s in request.query_params.getlist("state") if s in set(JobState)]
        after = _uuid_or_none(request.query_params.get("after"))
        key = request.query_params.get("key") or None
        text = request.query_params.get("text") or None
        jobs, next_after = await _select_jobs(
            store(), name, states=chosen, after=after, key=key, text=text
        )
        stats = await store().queue_stats(name)
        filters = [("state", s) for s in chosen] + [
            (field, value) for field, value in (("key", key), ("text", text)) if value
        ]
        return render(
            request,
            "jobs.html",
            queue=queue,
            queue_actions=await _queue_actions(store(), queue),
            stats=stats,
            jobs=jobs,
            chosen=chosen,
            key=key or "",
            text=text or "",
            filters=filters,
            searched=SEARCH_SCAN if (key or text) else None,
            next_after=None if next_after is None else str(next_after),
            paged=after is not None,
        )

    async def job_page(request: Request) -> Response:
        name = request.path_params["queue"]
        job_id = _uuid_or_none(request.path_params["job"])
        job = None if job_id is None else await store().get_job(name, job_id)
        if job is None:
            raise HTTPException(404, "no such job")
        actions = [a for a in JOB_ACTIONS if a == "delete" or accepts(Operation(a), job.state)]
        return render(
            request,
            "job.html",
            job=job,
            actions=actions,
            confirmed=CONFIRMED,
            error=_error_of(job),
            dead_letter=await _dead_letter_copy(store(), job),
            dependencies=await store().get_dependencies(name, job.id),
            dependents=await store().get_dependents(name, job.id),
        )

    async def schedules_page(request: Request) -> Response:
        return render(
            request,
            "schedules.html",
            schedules=await store().schedules(),
            now=dt.datetime.now(dt.UTC),
            actions=SCHEDULE_ACTIONS,
            confirmed=CONFIRMED,
        )

    async def workers_page(request: Request) -> Response:
        processes = await store().worker_processes()
        return render(request, "workers.html", processes=processes)

    async def confirm_page(request: Request) -> Response:
        """The confirmation of an irreversible action: a page whose button POSTs it."""
        action = request.path_params["action"]
        if action not in CONFIRMED or settings.read_only:
            raise HTTPException(405, "this action is a POST")
        name = check_queue_name(request.path_params["queue"])
        if "job" in request.path_params:
            job_id = _uuid_or_none(request.path_params["job"])
            what, back = f"job {job_id} of queue {name}", f"/queues/{name}/jobs/{job_id}"
            fields: dict[str, str] = {}
        else:
            key = request.query_params.get("key", "")
            what, back = f"the schedule of queue {name} with key {key!r}", "/schedules"
            fields = {"key": key}
        return render(
            request,
            "confirm.html",
            verb="Delete" if action == "delete" else "Remove",
            what=what,
            back=back,
            fields=fields,
        )

    async def schedule_action(request: Request) -> Response:
        name, action = await _posted(request, SCHEDULE_ACTIONS)
        key = (await request.form()).get("key", "")
        if not isinstance(key, str):
            raise HTTPException(400, "the schedule's key must be text")
        changed = await _schedule_action(store(), name, key, action)
        return RedirectResponse(f"/schedules?done={action}+{changed}", status_code=303)

    async def job_action(request: Request) -> Response:
        name, action = await _posted(request, JOB_ACTIONS)
        job_id = _uuid_or_none(request.path_params["job"])
        if job_id is None:
            raise HTTPException(404, "no such action")
        operation = {
            "retry": store().retry,
            "cancel": store().cancel,
            "resume": store().resume,
            "delete": store().delete_jobs,
        }[action]
        changed = await operation(name, [job_id])
        target = f"/queues/{name}" if action == "delete" else f"/queues/{name}/jobs/{job_id}"
        return RedirectResponse(f"{target}?done={action}+{changed}", status_code=303)

    async def queue_action(request: Request) -> Response:
        name, action = await _posted(request, QUEUE_ACTIONS)
        changed = await _queue_action(store(), name, action)
        return RedirectResponse(f"/queues/{name}?done={action}+{changed}", status_code=303)

    async def _posted(request: Request, known: Collection[str]) -> tuple[str, str]:
        """The queue and the action of a checked POST (:func:`_check_post`), the action
        one of ``known`` (else a 404)."""
        await _check_post(request)
        action = request.path_params["action"]
        if action not in known:
            raise HTTPException(404, "no such action")
        return request.path_params["queue"], action

    async def _check_post(request: Request) -> None:
        if settings.read_only:
            raise HTTPException(403, "this dashboard is read-only")
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
            raise HTTPException(403, "cross-origin request refused")
        form = await request.form()
        given = form.get("csrf")
        if not isinstance(given, str) or not same(given, csrf):
            raise HTTPException(403, "missing or wrong CSRF token")

    async def http_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, QueueNotFound | ScheduleNotFound):  # deleted while its page was open
            exc = HTTPException(404, str(exc))
        elif isinstance(exc, InvalidOptions):  # not a queue name (/queues/%3Cscript%3E)
            exc = HTTPException(400, str(exc))
        assert isinstance(exc, HTTPException)
        response = render(request, "error.html", status=exc.status_code, detail=exc.detail)
        response.status_code = exc.status_code
        return response

    static = Path(__file__).parent / "static"
    # A queue name may hold "/" (team/emails): {queue:path} takes it whole, so the longer
    # routes come first and a queue's page (the rest of the path) last.
    routes = [
        Route("/", queues_page),
        Route("/schedules", schedules_page),
        Route("/workers", workers_page),
        Route("/schedules/{queue:path}/{action}", confirm_page, methods=["GET"]),
        Route("/schedules/{queue:path}/{action}", schedule_action, methods=["POST"]),
        Route("/queues/{queue:path}/jobs/{job}", job_page),
        Route("/queues/{queue:path}/jobs/{job}/{action}", confirm_page, methods=["GET"]),
        Route("/queues/{queue:path}/jobs/{job}/{action}", job_action, methods=["POST"]),
        Route("/queues/{queue:path}/{action}", queue_action, methods=["POST"]),
        Route("/queues/{queue:path}", jobs_page),
        Mount("/static", StaticFiles(directory=static), name="static"),
    ]
    if settings.metrics:
        from .metrics import metrics_route

        routes.insert(0, metrics_route(store))
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(GuardMiddleware, token=settings.token)],
        exception_handlers={
            HTTPException: http_error,
            QueueNotFound: http_error,
            ScheduleNotFound: http_error,
            InvalidOptions: http_error,
        },
    )


async def _select_jobs(
    store: alkstore.AsyncStore,
    queue: str,
    *,
    states: list[str],
    after: uuid.UUID | None,
    key: str | None,
    text: str | None,
) -> tuple[list[Job], uuid.UUID | None]:
    """One page of ``queue``'s jobs and where the next one starts (None: no next page).

    Keyset paging on the job id, so a page costs the same at any depth of a large queue:
    ``list_jobs`` (one more job than a page tells whether a next page exists) without key
    or text, else ``search_jobs``, which reads at most :data:`SEARCH_SCAN` rows per page.
    """
    if key is None and text is None:
        jobs = await store.list_jobs(queue, states=states, limit=PAGE_SIZE + 1, after=after)
        more = len(jobs) > PAGE_SIZE
        jobs = jobs[:PAGE_SIZE]
        return jobs, jobs[-1].id if more else None
    try:
        page = await store.search_jobs(
            queue, states=states, key=key, text=text, after=after, limit=PAGE_SIZE, scan=SEARCH_SCAN
        )
    except InvalidOptions as exc:
        raise HTTPException(400, str(exc)) from None
    return page.jobs, page.next_after


async def _queue_actions(store: alkstore.AsyncStore, queue: Queue) -> dict[str, str]:
    """The :data:`QUEUE_ACTIONS` that apply to ``queue``: redrive to a dead-letter queue,
    pause a running queue, resume a paused one."""
    dead_letters = {q.options.dead_letter for q in await store.queues()}
    skip = {"pause" if queue.paused else "resume"}
    if queue.name not in dead_letters:
        skip.add("redrive")
    return {k: v for k, v in QUEUE_ACTIONS.items() if k not in skip}


async def _queue_action(store: alkstore.AsyncStore, queue: str, action: str) -> int:
    """Run the queue action ``action`` (a key of :data:`QUEUE_ACTIONS`); how many jobs (or,
    for pause and resume, queues) it changed."""
    if action == "redrive":
        return await store.redrive(queue)
    if action in ("pause", "resume"):  # a missing queue raises QueueNotFound: a 404
        await (store.pause_queue if action == "pause" else store.resume_queue)(queue)
        return 1
    raise HTTPException(404, "no such action")


async def _schedule_action(store: alkstore.AsyncStore, queue: str, key: str, action: str) -> int:
    """Run the schedule action ``action`` (a key of :data:`SCHEDULE_ACTIONS`); how many
    schedules it changed (or, for trigger, jobs it sent). A missing schedule raises
    :class:`ScheduleNotFound`: a 404."""
    if action == "pause":
        return int(await store.pause_schedule(queue, key))
    if action == "resume":
        return int(await store.resume_schedule(queue, key))
    if action == "trigger":
        return int(await store.trigger_schedule(queue, key) is not None)
    if action == "unschedule":
        return int(await store.unschedule(queue, key))
    raise HTTPException(404, "no such action")


async def _dead_letter_copy(store: alkstore.AsyncStore, job: Job) -> Job | None:
    """The dead-letter copy of a failed ``job``, if it is still in its dead-letter queue.

    The copy was made by the statement that failed the job, so its UUIDv7 id starts at the
    failure's time: the page looks at the first :data:`DEAD_LETTER_SCAN` jobs of that queue
    from a second before on, never the whole queue."""
    if job.state is not JobState.FAILED or job.completed_on is None:
        return None
    queue = job.dead_letter
    if queue is None:
        own = await store.get_queue(job.queue)
        queue = None if own is None else own.dead_letter
    if queue is None:
        return None
    millis = int(job.completed_on.timestamp() * 1000) - 1000
    with contextlib.suppress(QueueNotFound):  # the dead-letter queue was deleted since
        for candidate in await store.list_jobs(
            queue, limit=DEAD_LETTER_SCAN, after=uuid7_at(millis, 0)
        ):
            if candidate.source_id == job.id and candidate.source_queue == job.queue:
                return candidate
    return None


async def _sample(store: alkstore.AsyncStore, history: History, every: float) -> None:
    """Record every queue's counts each ``every`` seconds until cancelled."""
    while True:
        now = dt.datetime.now(dt.UTC)
        try:
            for queue in await store.queues():
                history.record(await store.queue_stats(queue.name), now)
        except Exception:
            # The pages show the error of a lost database; the chart just misses a sample.
            LOG.warning("sampling queue counts failed", exc_info=True)
        await asyncio.sleep(every)


def _done(code: str | None) -> str | None:
    """The flash message of an action's redirect (``?done=ACTION+COUNT``, as the action
    wrote it), or None for anything else: the page never shows text a link made up."""
    action, _, count = (code or "").partition(" ")
    known = action in JOB_ACTIONS or action in QUEUE_ACTIONS or action in SCHEDULE_ACTIONS
    return f"{action} {int(count)}" if known and count.isdecimal() and len(count) < 10 else None


def _refresh(request: Request) -> dict[str, Any]:
    """The page's auto-refresh: ``seconds`` (None: off), the URL the refresh reloads (this
    page without its ``done`` flash, which said what a POST did once) and the links that
    turn it on or off."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in ("done", "refresh")]
    given = request.query_params.get("refresh", "")
    seconds = int(given) if given.isdecimal() and int(given) in REFRESH_SECONDS else None

    def url(refresh: int | None) -> str:
        query = urlencode(params + ([("refresh", str(refresh))] if refresh else []))
        # One leading slash: "//host/..." would be a link to another site.
        path = "/" + request.url.path.lstrip("/")
        return path + (f"?{query}" if query else "")

    links = [("off", url(None), seconds is None)] + [
        (f"{s}s", url(s), seconds == s) for s in REFRESH_SECONDS
    ]
    return {"seconds": seconds, "url": url(seconds), "links": links}


def _uuid_or_none(text: str | None) -> uuid.UUID | None:
    if not text:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        raise HTTPException(400, f"not a job id: {text!r}") from None


def _error_of(job: Job) -> dict[str, Any] | None:
    """The error a failed attempt left in ``output`` (``name``, ``message``, ``stack``), if any."""
    if job.state not in (JobState.FAILED, JobState.RETRY) or not isinstance(job.output, dict):
        return None
    if not {"message", "stack"} & job.output.keys():
        return None
    return job.output
