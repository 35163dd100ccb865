"""``alkstore metrics``: serve the queues' statistics for Prometheus to scrape.

Needs the ``alkstore[metrics]`` extra; binds 127.0.0.1 unless ``--host`` says otherwise and
never creates a schema (docs/dashboard.md#prometheus).
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import CliError, add_store_arguments, open_store


def register(subparsers: Any) -> None:
    """Add the ``metrics`` subcommand."""
    parser = subparsers.add_parser("metrics", help="serve queue statistics for Prometheus")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9108)
    add_store_arguments(parser, json_help="refused: the output is Prometheus text")
    parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    if args.json:
        raise CliError("--json does not apply: metrics are served in Prometheus's text format")
    try:
        from prometheus_client import CollectorRegistry, start_http_server

        from alkstore.metrics import QueueCollector
    except ImportError as exc:
        raise CliError(f"metrics need pip install 'alkstore[metrics]' ({exc})") from exc
    with open_store(args) as store:
        registry = CollectorRegistry()
        registry.register(QueueCollector(store))
        server, thread = start_http_server(args.port, addr=args.host, registry=registry)
        print(f"serving metrics on http://{args.host}:{server.server_port}/metrics", flush=True)
        try:
            thread.join()
        finally:
            server.shutdown()
    return 0
