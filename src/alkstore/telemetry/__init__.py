"""OpenTelemetry spans and metrics for a store (extra ``alkstore[otel]``, docs/observability.md).

Nothing here is imported by alkstore itself: a store is measured only after
:func:`instrument`, which replaces its ``send``, ``send_many``, ``publish``, ``fetch``,
``complete``, ``complete_and_fetch``, ``fail`` and ``work`` with measured versions on that one
instance. An uninstrumented store runs no telemetry code at all.

The sends also store the send span's context in each job (its ``trace_context``, through
OpenTelemetry's configured propagator, W3C Trace Context by default), and the span of the
handler's processing links to it: a trace crosses the database from producer to consumer.

Spans and metrics follow the OpenTelemetry messaging semantic conventions with
``messaging.system = "alkstore"`` and the queue as ``messaging.destination.name``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from opentelemetry import metrics, trace

from ..core.errors import InvalidOptions
from ..store import AsyncStore, Store
from .instruments import Instruments
from .wrappers import wrap_async, wrap_sync

__all__ = ["instrument", "uninstrument"]

WRAPPED = (
    "send",
    "send_many",
    "publish",
    "fetch",
    "complete",
    "complete_and_fetch",
    "fail",
    "work",
)
"""The methods :func:`instrument` measures."""


def instrument(
    store: Store | AsyncStore,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    depth_queues: Iterable[str] = (),
) -> Store | AsyncStore:
    """Measure ``store`` from now on; returns it.

    Spans and metrics go to the given providers, else to OpenTelemetry's global ones.
    ``depth_queues`` names the queues whose queued jobs the ``alkstore.queue.depth`` gauge
    reports (read with ``queue_stats`` at each collection; a sync store only, since the
    metric reader calls it from its own thread). Instrumenting a store twice raises
    :class:`~alkstore.InvalidOptions`.
    """
    if "_telemetry" in store.__dict__:
        raise InvalidOptions("store", store, "is instrumented already")
    queues = _queue_names(depth_queues)
    tools = Instruments.create(tracer_provider, meter_provider)
    if queues:
        if not isinstance(store, Store):
            raise InvalidOptions(
                "depth_queues", queues, "needs a sync Store (the metric reader calls it)"
            )
        tools.observe_depth(store.queue_stats, queues)
    wrap = wrap_async if isinstance(store, AsyncStore) else wrap_sync
    for name in WRAPPED:
        setattr(store, name, wrap(name, getattr(store, name), tools))
    store.__dict__["_telemetry"] = tools
    return store


def uninstrument(store: Store | AsyncStore) -> None:
    """Stop measuring ``store`` (its methods are its class's again; a depth gauge stops
    reporting). A store that is not instrumented raises :class:`~alkstore.InvalidOptions`."""
    tools: Instruments | None = store.__dict__.pop("_telemetry", None)
    if tools is None:
        raise InvalidOptions("store", store, "is not instrumented")
    tools.stop_depth()
    for name in WRAPPED:
        del store.__dict__[name]


def _queue_names(queues: Iterable[str]) -> Sequence[str]:
    names = tuple(queues)
    for name in names:
        if not isinstance(name, str) or not name:
            raise InvalidOptions("depth_queues", name, "must be queue names")
    return names
