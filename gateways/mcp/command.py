"""The ``mesh mcp`` command (registered through the ``mesh.commands`` entry points).

The MCP SDK (and the config loader, the JOSE library) are imported when the command runs, not
when ``mesh`` registers its commands: every other command would otherwise pay for loading them.
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mesh.cli.common import EXIT_OK, add_connection_options, broker_settings, configure_logging
from mesh.errors import ConfigError
from topics import validate_identifier, validate_namespace

if TYPE_CHECKING:
    from mesh.artifacts import ArtifactSettings
    from mesh.broker import BrokerSettings
    from mesh.trust import Trust

    from .server import McpGateway

__all__ = ["register", "run_mcp"]

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = subparsers.add_parser(
        "mcp",
        help="serve the mesh's agents as MCP tools (for Claude, Cursor and any MCP client)",
        description=(
            "An MCP server in which every agent on the mesh is one tool: over stdio (what a client launches), "
            "or over streamable HTTP with --http PORT. Logs go to stderr; stdout carries MCP messages only."
        ),
    )
    mcp.add_argument(
        "--agents",
        nargs="+",
        metavar="PATTERN",
        default=[],
        help="expose only the agents whose names match one of these fnmatch patterns (default: all)",
    )
    mcp.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT (at /mcp) instead of stdio"
    )
    mcp.add_argument(
        "--host", default="127.0.0.1", help="the address --http listens on (default 127.0.0.1, this machine only)"
    )
    mcp.add_argument(
        "--config",
        metavar="FILE",
        help="a mesh config: its HTTP gateway's auth: guards --http, its trust: selects signed agents",
    )
    mcp.add_argument(
        "--gateway", metavar="ID", help="the HTTP gateway of --config whose auth: applies (default: first)"
    )
    mcp.add_argument(
        "--keys",
        metavar="DIR",
        type=Path,
        help="a `mesh keys` directory: list only agents whose cards a key of its jwks.json signed",
    )
    mcp.add_argument(
        "--id",
        metavar="ID",
        help="this gateway's id on the mesh (default mcp-<random>); with trust, its key <keys>/<ID>.jwk signs "
        "its card and the user tokens it mints (one process per id)",
    )
    mcp.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="end (and cancel) a tool call whose agent is silent this long (default 300)",
    )
    mcp.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    add_connection_options(mcp)
    mcp.set_defaults(handler=_mcp)


async def _mcp(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    if args.http is not None and not 0 <= args.http <= 65535:
        raise ConfigError(f"--http {args.http}: not a TCP port; give a number from 1 to 65535 (0: any free port)")
    gateway_id = validate_identifier(args.id, "gateway id") if args.id else f"mcp-{uuid.uuid4().hex[:8]}"
    auth, trust, artifacts = _settings(args, gateway_id)
    from mesh.brokertools.brokerrules import Identity
    from mesh.brokertools.joining import joined

    broker = broker_settings(args)  # --broker, --secure, TLS as for the other client commands
    # Beside a secured mesh up: a gateway user, key and issuer entry of its own for this run
    # (kept with --id); elsewhere the --client user's credentials, if any.
    identity = Identity("gateway", gateway_id, validate_namespace(args.namespace))
    async with joined(broker, identity, keep=args.id is not None, by="mesh mcp") as place:
        await run_mcp(
            place.settings if place is not None else broker.for_identity(args.client),
            args.namespace,
            gateway_id=gateway_id,
            patterns=args.agents,
            trust=trust or (place.trust if place is not None else None),
            idle_timeout_s=args.idle_timeout,
            http_port=args.http,
            host=args.host,
            auth=auth,
            artifacts=artifacts,
        )
    return EXIT_OK


def _settings(args: argparse.Namespace, gateway_id: str) -> tuple[object | None, Trust | None, ArtifactSettings | None]:
    """The auth (an HTTP gateway's ``auth:``), the trust and the artifact store of ``--config`` /
    ``--keys`` (the config file read once)."""
    from mesh.config import load_config
    from mesh.trust import TrustSettings, load_trust  # the JOSE library: when the command runs
    from mesh.trust.config import resolve

    auth: object | None = None
    trust: Trust | None = None
    artifacts: ArtifactSettings | None = None
    if args.config:
        config = load_config(args.config)
        artifacts = config.artifacts
        entries = [e for e in config.sections.get("gateways", []) if isinstance(e, dict) and e.get("kind") == "http"]
        if args.gateway:
            entries = [e for e in entries if e.get("id") == args.gateway]
            if not entries:
                raise ConfigError(f"{args.config}: no HTTP gateway with id {args.gateway!r}; check --gateway")
        if entries and entries[0].get("auth") is not None:
            from gateways.http.protection import AuthConfig  # the http extra, only when auth is configured

            try:
                auth = AuthConfig.model_validate(entries[0]["auth"])
            except ValueError as exc:
                raise ConfigError(f"{args.config}: the gateway's auth: is not valid: {exc}") from None
        trust = load_trust(gateway_id, config.trust, base=config.source.parent)
    elif args.gateway:
        raise ConfigError("--gateway names an HTTP gateway of --config; give --config FILE too")
    if args.keys is not None:
        if not args.keys.is_dir():
            raise ConfigError(f"--keys {args.keys}: not a directory; make one with `mesh keys NAME --dir DIR`")
        trust = resolve(TrustSettings(keys=args.keys), gateway_id, Path.cwd())
    if auth is not None and args.http is None:
        log.info("the gateway's auth: applies to --http only; stdio is the launching user's")
    return auth, trust, artifacts


async def run_mcp(
    broker: BrokerSettings,
    namespace: str,
    *,
    gateway_id: str | None = None,
    patterns: Sequence[str] = (),
    trust: Trust | None = None,
    idle_timeout_s: float = 300.0,
    http_port: int | None = None,
    host: str = "127.0.0.1",
    auth: object | None = None,
    artifacts: ArtifactSettings | None = None,
) -> None:
    """Serve MCP on stdio until stdin closes, or on HTTP until stopped.

    ``artifacts``: the store tool results' artifact links are read from (``resources/read``);
    by default ``MESH_ARTIFACTS`` or the embedded store, as the agents use."""
    from mesh.artifacts import open_store, resolve_settings
    from mesh.cli.gctuning import tune_for_serving

    from .bridge import MeshBridge
    from .resources import ArtifactResources
    from .server import McpGateway

    bridge = MeshBridge(
        gateway_id or f"mcp-{uuid.uuid4().hex[:8]}",
        broker=broker,
        namespace=namespace,
        patterns=patterns,
        trust=trust,
        idle_timeout_s=idle_timeout_s,
    )
    gateway = McpGateway(bridge, ArtifactResources(open_store(resolve_settings(artifacts), namespace)))
    gateway.bind_loop()
    await bridge.start()
    tune_for_serving()  # as `mesh run` does once its components are started
    try:
        if http_port is None:
            await _serve_stdio(gateway)
        else:
            await _serve_http(gateway, host, http_port, auth)
    finally:
        await gateway.close()
        await bridge.stop()
        if gateway.resources is not None:
            await gateway.resources.close()


async def _serve_stdio(gateway: McpGateway) -> None:
    from .stdio import stdio_streams

    async with stdio_streams() as (read, write):
        await gateway.server.run(read, write, gateway.initialization_options())


async def _serve_http(gateway: McpGateway, host: str, port: int, auth: object | None) -> None:
    from gateways.http.mcp_edge import serve_mcp_http
    from gateways.http.protection import AuthConfig

    from .server import PRINCIPAL_SCOPE_KEY

    app = gateway.server.streamable_http_app(host=host)

    def ready(bound: int) -> None:
        print(f"mesh mcp: serving MCP on http://{host}:{bound}/mcp", file=sys.stderr, flush=True)

    await serve_mcp_http(
        app,
        host=host,
        port=port,
        auth=auth if isinstance(auth, AuthConfig) else None,
        principal_key=PRINCIPAL_SCOPE_KEY,
        on_ready=ready,
    )
