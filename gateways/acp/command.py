"""The ``mesh acp AGENT`` command (registered through the ``mesh.commands`` entry points).

Registering it imports nothing heavy: the ACP SDK and the gateway load when the command runs,
so ``mesh --help`` stays fast, and without the ``acp`` extra the command says how to get it.
"""

from __future__ import annotations

import argparse
import logging
import uuid
from typing import TYPE_CHECKING, Any

from mesh.cli.common import EXIT_OK, add_connection_options, broker_settings, configure_logging
from mesh.errors import ConfigError
from topics import validate_identifier, validate_namespace

if TYPE_CHECKING:
    from mesh.a2a import AgentCard
    from mesh.broker import BrokerSettings
    from mesh.trust import Trust

__all__ = ["register", "run_acp"]

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    acp = subparsers.add_parser(
        "acp",
        help="serve ACP (Agent Client Protocol) on stdio, forwarding to a mesh agent (for editors)",
        description=(
            "An ACP agent on stdin/stdout that an editor launches: prompts go to AGENT on the mesh; the "
            "session's modes are the other agents. Logs go to stderr; stdout carries ACP messages only."
        ),
    )
    acp.add_argument("agent", help="the mesh agent prompts go to (the default mode)")
    acp.add_argument(
        "--wait", type=float, default=3.0, metavar="S", help="seconds to wait for an agent's card (default 3)"
    )
    acp.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="cancel a task silent for this long (default 300)",
    )
    acp.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    add_connection_options(acp)
    acp.set_defaults(handler=_acp)


async def _acp(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    validate_identifier(args.agent, "agent name")
    from mesh.brokertools.brokerrules import Identity
    from mesh.brokertools.joining import joined

    broker = broker_settings(args)  # --broker, --secure, TLS as for the other client commands
    gateway_id = f"acp-{uuid.uuid4().hex[:8]}"
    # Beside a secured mesh up: a gateway user, key and issuer entry of its own for this run;
    # elsewhere the --client user's credentials, if any.
    identity = Identity("gateway", gateway_id, validate_namespace(args.namespace))
    async with joined(broker, identity, keep=False, by="mesh acp") as place:
        await run_acp(
            place.settings if place is not None else broker.for_identity(args.client),
            args.namespace,
            args.agent,
            wait_s=args.wait,
            idle_timeout_s=args.idle_timeout,
            gateway_id=gateway_id,
            trust=place.trust if place is not None else None,
        )
    return EXIT_OK


async def run_acp(
    broker: BrokerSettings,
    namespace: str,
    agent: str,
    *,
    wait_s: float = 3.0,
    idle_timeout_s: float = 300.0,
    gateway_id: str | None = None,
    trust: Trust | None = None,
) -> None:
    """Serve ACP on this process's stdio until stdin closes (``trust``: the gateway's key signs its
    card and user tokens; its registry takes only signed cards)."""
    try:
        from acp.connection import Connection
    except ImportError as exc:
        raise ConfigError(f"mesh acp needs the ACP SDK ({exc}); pip install 'mqtt-agent-mesh[acp]'") from exc
    from gateways.acp.server import AcpGateway
    from gateways.acp.sessions import SessionStore
    from gateways.acp.stdio import StdioTransport
    from gateways.runtime import GatewayRuntime

    gateway_id = gateway_id or f"acp-{uuid.uuid4().hex[:8]}"
    runtime = GatewayRuntime(
        gateway_id,
        broker=broker,
        namespace=namespace,
        card=lambda: _card(gateway_id, namespace, agent).to_json_bytes(),
        idle_timeout_s=idle_timeout_s,
        trust=trust,
    )
    gateway = AcpGateway(runtime, agent, wait_s=wait_s, store=SessionStore.for_namespace(namespace))
    gateway.connect_in_background()
    transport = await StdioTransport.open()
    connection = Connection(gateway.handle, transport, listening=False)

    async def notify(method: str, params: dict[str, object]) -> None:
        await connection.send_notification(method, params)

    async def request(method: str, params: dict[str, Any]) -> Any:
        return await connection.send_request(method, params)

    gateway.notify = notify
    gateway.request = request
    try:
        await connection.main_loop()  # until stdin closes
    finally:
        await connection.close()
        await gateway.stop()


def _card(gateway_id: str, namespace: str, agent: str) -> AgentCard:
    from mesh.a2a import AgentCapabilities, AgentCard

    return AgentCard(
        name=gateway_id,
        description=f"ACP gateway (stdio) to agent {agent!r} of namespace {namespace!r}",
        version="1.0.0",
        url=f"stdio://{gateway_id}",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[],
    )
