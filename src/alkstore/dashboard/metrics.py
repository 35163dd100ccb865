"""The dashboard's ``/metrics`` (``DashboardSettings.metrics``, off by default): the queues'
metrics of ``alkstore metrics`` in Prometheus's text format, behind the dashboard's token
(a scraper sends it as ``Authorization: Bearer …``). Needs ``alkstore[metrics]``."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import alkstore
from alkstore.metrics import exposition, read_async


def metrics_route(store: Callable[[], alkstore.AsyncStore]) -> Route:
    """``GET /metrics`` reading the store ``store()`` returns at each scrape."""

    async def metrics(_request: Request) -> Response:
        snapshot = await read_async(store())
        return Response(exposition(snapshot), media_type=CONTENT_TYPE_LATEST)

    return Route("/metrics", metrics)
