"""``alkstore dashboard``: serve the web dashboard (the ``alkstore[dashboard]`` extra).

It binds 127.0.0.1 unless told otherwise and never creates a schema (docs/dashboard.md).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import ipaddress
import os
import sys
from typing import Any

from .common import CliError, add_connection_arguments

TOKEN_ENV = "ALKSTORE_DASHBOARD_TOKEN"
"""The environment variable ``--token`` defaults to (a token on the command line is visible
to every user of the machine in the process list)."""


def register(subparsers: Any) -> None:
    """Add the ``dashboard`` subcommand."""
    parser = subparsers.add_parser("dashboard", help="serve the web dashboard")
    add_connection_arguments(parser, drivers=("psycopg", "asyncpg"), dsn_help="postgresql://…")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--read-only", action="store_true", help="show, never change, anything")
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"require this token of every request (default: ${TOKEN_ENV})",
    )
    parser.add_argument(
        "--metrics", action="store_true", help="also serve /metrics for Prometheus (token too)"
    )
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )
    parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from alkstore.dashboard import DashboardError, DashboardSettings, create_app
        from alkstore.dashboard.app import open_store

        if args.metrics:
            import alkstore.dashboard.metrics  # noqa: F401  (refused here without the extra)
    except ImportError as exc:
        raise CliError(f"the dashboard needs pip install 'alkstore[dashboard]' ({exc})") from exc
    settings = DashboardSettings(
        dsn=args.dsn,
        schema=args.schema,
        engine=args.engine,
        driver=args.driver,
        read_only=args.read_only,
        token=args.token or None,
        metrics=args.metrics,
    )

    async def check() -> None:  # a missing schema in one line, not uvicorn's startup traceback
        await (await open_store(settings)).close()

    try:
        asyncio.run(check())
    except DashboardError as exc:
        raise CliError(str(exc)) from exc
    if settings.token is None and not _local(args.host):
        changes = "see" if settings.read_only else "see and change"
        print(
            f"alkstore dashboard: warning: serving on {args.host} without a token: anyone who"
            f" can reach it can {changes} every job (set --token or ${TOKEN_ENV})",
            file=sys.stderr,
        )
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level="info",
        log_config=_log_config(uvicorn.config.LOGGING_CONFIG),
    )
    return 0


def _local(host: str) -> bool:
    """Whether ``host`` is a loopback address (only this machine can connect)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _log_config(base: dict[str, Any]) -> dict[str, Any]:
    """uvicorn's logging configuration ``base`` with the dashboard's token kept out of its
    access log."""
    config = copy.deepcopy(base)
    config.setdefault("filters", {})["no_token"] = {
        "()": "alkstore.dashboard.security.TokenLogFilter"
    }
    config["handlers"]["access"].setdefault("filters", []).append("no_token")
    return config
