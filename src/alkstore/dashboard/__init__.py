"""A web dashboard over a store: queues, jobs, one job, schedules, and the admin actions.

``alkstore dashboard --dsn …`` serves it (the ``alkstore[dashboard]`` extra: Starlette, Jinja2,
uvicorn); :func:`create_app` builds the ASGI app for embedding. See docs/dashboard.md.
"""

from __future__ import annotations

from .app import DashboardError, DashboardSettings, create_app

__all__ = ["DashboardError", "DashboardSettings", "create_app"]
