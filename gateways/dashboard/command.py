"""The ``mesh dashboard`` command (registered through the ``mesh.commands`` entry points)."""

from __future__ import annotations

import argparse
import sys

from mesh.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    add_connection_options,
    card_verifier,
    client_settings,
    configure_logging,
    fail,
    stopped_by_signals,
)
from topics import validate_namespace

__all__ = ["register"]

DEFAULT_PORT = 8090


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dashboard = subparsers.add_parser(
        "dashboard",
        help="serve the live dashboard of a namespace on a small web server of its own",
        description=(
            "Serve the dashboard (agents, tasks, delegation trees, rates, sending) at http://HOST:PORT/ui "
            "for a mesh without an HTTP gateway (a gateway serves it at /ui itself). It has no "
            "authentication: it listens on 127.0.0.1 unless --host says otherwise. Runs until Ctrl-C."
        ),
    )
    dashboard.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    dashboard.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to listen on; 0 picks a free one (default {DEFAULT_PORT})"
    )
    dashboard.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    add_connection_options(dashboard)
    dashboard.set_defaults(handler=_dashboard)


async def _dashboard(args: argparse.Namespace) -> int:
    # Loaded when the command runs, not when `mesh` builds its parser (the http extra too).
    import asyncio

    from gateways.dashboard.service import Dashboard
    from gateways.http.dashboard import DashboardServer
    from mesh.schedules.store import open_schedule_store

    configure_logging(args.log_level)
    namespace = validate_namespace(args.namespace)
    if not 0 <= args.port <= 65535:
        fail(f"--port {args.port} is no port; give 0-65535 (0 picks a free one)")
        return EXIT_USAGE
    settings = client_settings(args)
    # The agents' next scheduled runs: from $MESH_STORE's record, else the machine's (docs/schedules.md).
    schedules = open_schedule_store(namespace)
    # Under trust (a secured mesh up): signed cards only; the others shown as refused.
    dashboard = Dashboard(settings, namespace, verifier=card_verifier(settings, namespace), schedules=schedules)
    await dashboard.start()  # fails now if the broker cannot be reached
    server = DashboardServer(dashboard, host=args.host, port=args.port)
    try:
        await server.start()
    except OSError as exc:
        await dashboard.close()
        fail(str(exc))
        return EXIT_USAGE
    stop = asyncio.Event()
    try:
        with stopped_by_signals(stop):
            print(f"dashboard of {namespace!r} at {server.url} (Ctrl-C stops)", flush=True)
            await stop.wait()
    finally:
        await server.stop()
        close = getattr(schedules, "close", None)  # a PostgreSQL record's connection
        if close is not None:
            await asyncio.to_thread(close)
    print("dashboard stopped", file=sys.stderr)
    return EXIT_OK
