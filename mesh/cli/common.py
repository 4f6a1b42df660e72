"""What every ``mesh`` command shares: broker/namespace options, exit codes, error reporting,
stopping on a signal."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from mesh.a2a import RpcError
from mesh.broker import BROKER_URL_ENV, BrokerSettings, resolve_broker_url
from mesh.errors import (
    AgentNameTakenError,
    AgentNotFoundError,
    AgentUnavailableError,
    ConfigError,
    ConnectError,
    MeshError,
    NotConnectedError,
    PublishTimeoutError,
    RequestTimeoutError,
)
from mesh.localbroker import BrokerUnavailableError
from topics import TopicError

NAMESPACE_ENV = "MESH_NAMESPACE"
DEFAULT_NAMESPACE = "mesh"

# Exit codes, documented in the README.
EXIT_OK = 0
EXIT_TASK_NOT_COMPLETED = 1  # the task ended failed, canceled or rejected
EXIT_USAGE = 2  # bad arguments or configuration, or an agent name a live instance already serves
EXIT_BROKER = 3  # the broker is unreachable or refused us
EXIT_UNKNOWN_AGENT = 4  # no card of the agent, nobody listens on its topic, or it went away
EXIT_TIMEOUT = 5
EXIT_AGENT_ERROR = 6  # the agent answered with a JSON-RPC error
EXIT_INTERRUPTED = 130

Command = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


def add_connection_options(parser: argparse.ArgumentParser, *, namespace: bool = True) -> None:
    parser.add_argument(
        "--broker",
        metavar="URL",
        help=f"MQTT broker, mqtt[s]://[user:pass@]host[:port] (default: ${BROKER_URL_ENV}, then mqtt://localhost:1883)",
    )
    if namespace:
        parser.add_argument(
            "--namespace",
            "-n",
            metavar="NS",
            default=os.environ.get(NAMESPACE_ENV, DEFAULT_NAMESPACE),
            help=f"topic namespace (default: ${NAMESPACE_ENV}, then {DEFAULT_NAMESPACE!r})",
        )


def broker_settings(args: argparse.Namespace, configured: str | None = None) -> BrokerSettings:
    return BrokerSettings.from_url(resolve_broker_url(args.broker, configured))


def configure_logging(level: str = "info") -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )


def fail(message: str) -> None:
    print(f"mesh: {message}", file=sys.stderr)


def exit_code_for(exc: BaseException) -> int | None:
    """The exit code of an error the CLI reports in one line (None: a bug, show the traceback)."""
    if isinstance(exc, ConnectError | NotConnectedError | BrokerUnavailableError):
        return EXIT_BROKER
    if isinstance(exc, AgentNotFoundError | AgentUnavailableError):
        return EXIT_UNKNOWN_AGENT
    if isinstance(exc, RequestTimeoutError | PublishTimeoutError):
        return EXIT_TIMEOUT
    if isinstance(exc, RpcError):
        return EXIT_AGENT_ERROR
    if isinstance(exc, ConfigError | TopicError | AgentNameTakenError):
        return EXIT_USAGE
    if isinstance(exc, MeshError):
        return EXIT_BROKER
    return None


def describe(exc: BaseException) -> str:
    if isinstance(exc, RpcError):
        return f"the agent answered with error {exc.code}: {exc.error.message}"
    return str(exc)


@contextlib.contextmanager
def stopped_by_signals(stop: asyncio.Event) -> Iterator[None]:
    """Set ``stop`` on SIGINT / SIGTERM inside the block; a second Ctrl-C after it interrupts."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
