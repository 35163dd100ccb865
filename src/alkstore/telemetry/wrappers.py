"""The measured versions of a store's methods that :func:`~alkstore.telemetry.instrument`
puts on an instrumented store: one span and one duration per call, plus counts."""

from __future__ import annotations

import functools
import inspect
import time
import uuid
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from ..core.records import Handoff, Job
from .instruments import Instruments, base_attributes

KINDS: dict[str, tuple[SpanKind, str]] = {
    "send": (SpanKind.PRODUCER, "send"),
    "send_many": (SpanKind.PRODUCER, "send"),
    "publish": (SpanKind.PRODUCER, "send"),
    "fetch": (SpanKind.CLIENT, "receive"),
    "complete": (SpanKind.CLIENT, "settle"),
    "complete_and_fetch": (SpanKind.CLIENT, "settle"),
    "fail": (SpanKind.CLIENT, "settle"),
    "process": (SpanKind.CONSUMER, "process"),
}
"""Each measured operation's span kind and ``messaging.operation.type``."""

SETTLES = {"complete": "completed", "complete_and_fetch": "completed", "fail": "failed"}
"""The ``alkstore.outcome`` of the jobs each settling operation counts."""


def wrap_sync(name: str, method: Callable[..., Any], tools: Instruments) -> Callable[..., Any]:
    """The measured version of the sync store method ``name``."""
    if name == "work":

        @functools.wraps(method)
        def work(queue: str, handler: Callable[..., Any], **options: Any) -> Any:
            return method(queue, _process_sync(handler, queue, tools), **options)

        return work

    @functools.wraps(method)
    def measured(queue: str, *args: Any, **kwargs: Any) -> Any:
        args = _settled_ids(name, args, kwargs)
        with _Measured(tools, name, queue, args) as span:
            args = _carry(name, args, kwargs)
            result = method(queue, *args, **kwargs)
            _count(tools, name, queue, span, result)
            return result

    return measured


def wrap_async(name: str, method: Callable[..., Any], tools: Instruments) -> Callable[..., Any]:
    """The measured version of the async store method ``name``."""
    if name == "work":

        @functools.wraps(method)
        async def work(queue: str, handler: Callable[..., Any], **options: Any) -> Any:
            return await method(queue, _process_async(handler, queue, tools), **options)

        return work

    @functools.wraps(method)
    async def measured(queue: str, *args: Any, **kwargs: Any) -> Any:
        args = _settled_ids(name, args, kwargs)
        with _Measured(tools, name, queue, args) as span:
            args = _carry(name, args, kwargs)
            result = await method(queue, *args, **kwargs)
            _count(tools, name, queue, span, result)
            return result

    return measured


def _process_sync(handler: Callable[..., Any], queue: str, tools: Instruments) -> Any:
    # functools.wraps keeps the handler's signature (inspect follows __wrapped__), so the
    # worker still sees whether it takes a context.
    @functools.wraps(handler)
    def process(arg: Any, *rest: Any) -> Any:
        with _Measured(tools, "process", queue, (arg,), *_creation(arg)):
            return handler(arg, *rest)

    return process


def _process_async(handler: Callable[..., Any], queue: str, tools: Instruments) -> Any:
    @functools.wraps(handler)
    async def process(arg: Any, *rest: Any) -> Any:
        with _Measured(tools, "process", queue, (arg,), *_creation(arg)):
            result = handler(arg, *rest)
            return await result if inspect.isawaitable(result) else result

    return process


def _settled_ids(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """``args`` with the ids of a settling call as a list (an iterator is read once: here)."""
    if name not in SETTLES:
        return args
    if "ids" in kwargs:
        kwargs["ids"] = _id_list(kwargs["ids"])
        return args
    return (_id_list(args[0]), *args[1:]) if args else args


def _id_list(ids: Any) -> Any:
    return ids if isinstance(ids, uuid.UUID | str | Job) else list(ids)


def _carry(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The arguments of a send with the current (send) span's context as the jobs'
    ``trace_context``, where the caller gave none (docs/observability.md)."""
    if name not in ("send", "send_many", "publish"):
        return args
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier:  # no span is recording and no propagator writes anything
        return args
    if name != "send_many":
        kwargs.setdefault("trace_context", carrier)
        return args
    if "jobs" in kwargs:
        kwargs["jobs"] = _traced_jobs(kwargs["jobs"], carrier)
        return args
    return (_traced_jobs(args[0], carrier), *args[1:]) if args else args


def _traced_jobs(jobs: Any, carrier: dict[str, str]) -> list[Any]:
    """The jobs of a ``send_many``, each carrying ``carrier`` unless it has its own context
    (anything not a mapping is passed on for the store to refuse)."""
    return [
        {**spec, "trace_context": carrier}
        if isinstance(spec, Mapping) and "trace_context" not in spec
        else spec
        for spec in jobs
    ]


def _creation(arg: Any) -> tuple[Context | None, list[Link]]:
    """The parent context and the links of the process span of ``arg`` (a job or a batch).

    Following the messaging conventions, the span links to the send span of every job that
    carries a ``trace_context``; a single job's send context is also the parent, unless the
    handler already runs inside a span of the application's.
    """
    jobs = arg if isinstance(arg, list) else [arg]
    links: list[Link] = []
    parent: Context | None = None
    # The jobs of a batch were mostly sent together: each distinct context is extracted once
    # and its one link repeated for every job that carries it.
    extracted: dict[tuple[tuple[str, str], ...], tuple[Context, Link | None]] = {}
    for job in jobs:
        carrier = getattr(job, "trace_context", None)
        if not carrier:
            continue
        key = tuple(carrier.items())
        found = extracted.get(key)
        if found is None:
            context = propagate.extract(carrier)
            span_context = trace.get_current_span(context).get_span_context()
            link = Link(span_context) if span_context.is_valid else None
            found = extracted[key] = (context, link)
        if found[1] is not None:
            links.append(found[1])
            parent = found[0]
    if len(jobs) != 1 or trace.get_current_span().get_span_context().is_valid:
        parent = None
    return parent, links


class _Measured:
    """A span named ``"{name} {queue}"``, current while the ``with`` block runs, and one
    ``messaging.client.operation.duration`` point.

    A class rather than a ``contextmanager`` generator, with each (operation, queue)'s
    attributes built once: the instrumented drain spends its telemetry time here
    (docs/observability.md, "Overhead")."""

    __slots__ = ("metric_attributes", "span", "start", "token", "tools")

    def __init__(
        self,
        tools: Instruments,
        name: str,
        queue: str,
        args: tuple[Any, ...],
        parent: Context | None = None,
        links: list[Link] | None = None,
    ) -> None:
        kind, span_attributes, self.metric_attributes = _attributes(name, queue)
        if name in SETTLES or name == "process":
            span_attributes = _describe_messages(span_attributes, args[0] if args else None)
        self.tools = tools
        self.start = time.perf_counter()
        self.span = tools.tracer.start_span(
            f"{name} {queue}", context=parent, kind=kind, attributes=span_attributes, links=links
        )

    def __enter__(self) -> Span:
        # The span is made current by hand, as start_as_current_span would, without its two
        # nested generator context managers (15 % of the cost of a measured call).
        self.token = otel_context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, kind: Any, exc: BaseException | None, _tb: Any) -> None:
        metric_attributes = self.metric_attributes
        try:
            if exc is not None:
                metric_attributes = {**metric_attributes, "error.type": type(exc).__qualname__}
                if isinstance(exc, Exception):
                    self.span.record_exception(exc)
                    self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        finally:
            # Even when describing the error failed: a span left current would parent every
            # later span of this thread or task.
            otel_context.detach(self.token)
            self.span.end()
            self.tools.duration.record(time.perf_counter() - self.start, metric_attributes)


_Attributes = Mapping[str, Any]


def _attributes(name: str, queue: str) -> tuple[SpanKind, _Attributes, _Attributes]:
    """The span kind, span attributes and metric attributes of ``name`` on ``queue``; a
    queue name (the usual case) gets them from :func:`_shared_attributes`."""
    if isinstance(queue, str):
        return _shared_attributes(name, queue)
    # Not a name the store will accept: let the store refuse it, not the cache.
    return _build_attributes(name, queue)


@functools.lru_cache(maxsize=1024)
def _shared_attributes(name: str, queue: str) -> tuple[SpanKind, _Attributes, _Attributes]:
    """:func:`_build_attributes`, built once per (operation, queue) and shared between
    calls, read-only."""
    kind, span_attributes, metric_attributes = _build_attributes(name, queue)
    return kind, MappingProxyType(span_attributes), MappingProxyType(metric_attributes)


def _build_attributes(name: str, queue: Any) -> tuple[SpanKind, dict[str, Any], dict[str, Any]]:
    kind, op_type = KINDS[name]
    metric_attributes = base_attributes(queue)
    metric_attributes["messaging.operation.name"] = name
    return kind, {**metric_attributes, "messaging.operation.type": op_type}, metric_attributes


def _describe_messages(attributes: _Attributes, ids: Any) -> _Attributes:
    """``attributes`` with ``messaging.message.id`` for one job, ``messaging.batch.message_count``
    for a batch (a new mapping: ``attributes`` is shared)."""
    if isinstance(ids, uuid.UUID | str | Job):
        return {**attributes, "messaging.message.id": str(ids.id if isinstance(ids, Job) else ids)}
    if isinstance(ids, list):
        return {**attributes, "messaging.batch.message_count": len(ids)}
    return attributes


def _count(tools: Instruments, name: str, queue: str, span: Span, result: Any) -> None:
    """Add what the call did to the span and the counts."""
    if name == "publish":
        span.set_attribute("messaging.batch.message_count", len(result))
        tools.sent.add(len(result), queue, name)
    elif name == "send":
        if result is None:
            span.set_attribute("alkstore.refused", True)
            return
        span.set_attribute("messaging.message.id", str(result))
        tools.sent.add(1, queue, name)
    elif name == "send_many":
        span.set_attribute("messaging.batch.message_count", len(result))
        tools.sent.add(sum(1 for i in result if i is not None), queue, name)
    elif name == "fetch":
        _received(tools, span, result, queue, name)
    else:
        if isinstance(result, Handoff):
            _received(tools, span, result.jobs, queue, name)
            result = result.completed
        tools.settled.add(int(result), queue, name, SETTLES[name])


def _received(tools: Instruments, span: Span, jobs: list[Job], queue: str, name: str) -> None:
    if len(jobs) == 1:
        span.set_attribute("messaging.message.id", str(jobs[0].id))
    span.set_attribute("alkstore.received.message_count", len(jobs))
    tools.received.add(len(jobs), queue, name)
