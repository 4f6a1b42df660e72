"""``mesh run FILE...`` and ``mesh up``: start components and serve until Ctrl-C / SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from urllib.parse import urlsplit

from mesh.broker import BrokerSettings
from mesh.brokerfiles import SECURE_BROKER_URL, identities_of, secure_state_dir
from mesh.cli.broker_commands import secure_broker
from mesh.cli.common import (
    EXIT_OK,
    NAMESPACE_ENV,
    add_connection_options,
    broker_settings,
    configure_logging,
    stopped_by_signals,
)
from mesh.component import Component
from mesh.config import LOG_LEVELS, MeshConfig, configured_broker, configured_tls, load_many
from mesh.errors import ConfigError, ConnectError
from mesh.gctuning import tune_for_serving
from mesh.localbroker import port_answers, running_broker
from mesh.redaction import redact_url
from mesh.sections import build_many
from topics import validate_namespace

log = logging.getLogger(__name__)

UP_GROUP = "mesh.up"  # entry points naming the config files `mesh up` runs
_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = subparsers.add_parser(
        "run",
        help="run the agents and gateways described in config files",
        description="Run every agent and gateway of the given YAML files in this process until Ctrl-C.",
    )
    run.add_argument("files", nargs="+", type=Path, metavar="FILE", help="mesh config file (YAML)")
    run.add_argument("--log-level", choices=LOG_LEVELS, help="override the files' log_level")
    run.add_argument(
        "--namespace", "-n", metavar="NS", help="run every component on this namespace, whatever the files say"
    )
    add_connection_options(run, namespace=False)
    run.set_defaults(handler=_run)

    up = subparsers.add_parser(
        "up",
        help="start a local Mosquitto if needed, the example agents and the HTTP gateway",
        description=(
            "Use the broker at --broker / $MESH_BROKER_URL (default mqtt://localhost:1883), or start Mosquitto "
            "from mosquitto.conf when none answers there, then run the example agents and the HTTP gateway "
            "until Ctrl-C."
        ),
    )
    up.add_argument(
        "--config",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="also run the components of FILE (repeatable)",
    )
    up.add_argument("--log-level", choices=LOG_LEVELS, default="info")
    add_connection_options(
        up,
        secure_help=(
            f"start a TLS broker at {SECURE_BROKER_URL} (or --broker mqtts://localhost:PORT) with a broker user per "
            "component and least-privilege rules; its files go to <state dir>/secure"
        ),
    )
    up.set_defaults(handler=_up)


async def _run(args: argparse.Namespace) -> int:
    configs = load_many(args.files)
    if args.namespace is not None:
        try:
            namespace = validate_namespace(args.namespace)
        except ValueError as exc:
            raise ConfigError(f"--namespace: {exc}") from exc
        configs = [dataclasses.replace(config, namespace=namespace) for config in configs]
    if not any(entries for config in configs for entries in config.sections.values()):
        names = ", ".join(str(f) for f in args.files)
        raise ConfigError(f"{names}: nothing to run; add an 'agents:' or 'gateways:' section")
    configure_logging(args.log_level or configs[0].log_level)
    broker = broker_settings(args, configured_broker(configs), configured_tls(configs))
    return await serve(build_many(configs, broker))


async def _up(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    environ = {**os.environ, NAMESPACE_ENV: args.namespace}
    configs = load_many([*up_configs(), *args.config], environ=environ)
    if args.secure:
        configs = with_secure_trust(configs, secure_state_dir() / "keys")
        with secure_broker(args.broker or SECURE_BROKER_URL, configs, [args.client]) as settings:
            components = build_many(configs, settings)
            how = f"started here with TLS and per-component users, files in {secure_state_dir()}"
            return await serve(
                components, banner=lambda: up_banner(settings, args.namespace, components, how, secure=True)
            )
    settings = broker_settings(args)  # with --ca-file / --cert / --key / --insecure
    async with broker_for_up(settings) as started_here:
        components = build_many(configs, settings)
        return await serve(components, banner=lambda: up_banner(settings, args.namespace, components, started_here))


def with_secure_trust(configs: list[MeshConfig], keys_dir: Path) -> list[MeshConfig]:
    """``configs`` with signed cards and user tokens on: a key per component in ``keys_dir``
    (kept across runs), every card signed and checked, the gateways' user tokens verified.

    A config that has its own ``trust:`` keeps it.
    """
    from mesh.trust import generate_keys  # the JOSE library loads only for --secure

    identities = identities_of(configs, ())
    generate_keys(keys_dir, [identity.name for identity in identities])
    issuers = sorted({identity.name for identity in identities if identity.kind == "gateway"})
    trust = {"keys": str(keys_dir), "token_issuers": issuers}
    return [config if config.trust is not None else dataclasses.replace(config, trust=trust) for config in configs]


def up_configs() -> list[Path]:
    """The config files registered under the ``mesh.up`` entry-point group."""
    paths = [Path(ep.load()) for ep in sorted(entry_points(group=UP_GROUP), key=lambda ep: ep.name)]
    if not paths:
        raise ConfigError("no example configs are registered (mesh.up entry points); reinstall the package")
    return paths


@contextlib.asynccontextmanager
async def broker_for_up(settings: BrokerSettings) -> AsyncIterator[str | None]:
    """Yield None if a broker answers at ``settings``; else start Mosquitto there and yield how."""
    if await asyncio.to_thread(port_answers, settings.host, settings.port):
        yield None
        return
    if settings.host not in _LOCAL_HOSTS:
        raise ConnectError(
            f"no MQTT broker answers at {settings.url}, and mesh up only starts one on this machine; "
            "start that broker, or pass --broker mqtt://localhost:1883"
        )
    log.info("no broker answers at %s; starting Mosquitto from mosquitto.conf", settings.url)
    with running_broker(prefer="binary", port=settings.port) as broker:
        log_file = getattr(broker, "log_file", None)
        how = "started here from mosquitto.conf, " + (f"log {log_file}" if log_file else "in a container")
        yield how


async def serve(components: Sequence[Component], *, banner: Callable[[], str] | None = None) -> int:
    """Start every component, wait for SIGINT/SIGTERM, then stop them all cleanly."""
    stop = asyncio.Event()
    started: list[Component] = []
    try:
        # Leaving the block restores the default handlers: a second Ctrl-C interrupts a stuck shutdown.
        with stopped_by_signals(stop):
            # Agents first: when one is refused (a live instance owns its name: a second `mesh up`),
            # the run ends before its gateways publish, and on their way out clear, cards of their own.
            agents = [c for c in components if c.kind == "agent"]
            for phase in (agents, [c for c in components if c.kind != "agent"]):
                results = await asyncio.gather(*(c.start() for c in phase), return_exceptions=True)
                started += [c for c, r in zip(phase, results, strict=True) if not isinstance(r, BaseException)]
                failures = [(c, r) for c, r in zip(phase, results, strict=True) if isinstance(r, BaseException)]
                for component, error in failures[1:]:  # the first one is the command's error message
                    log.error("%s %s did not start: %s", component.kind, component.name, error)
                if failures:
                    raise failures[0][1]
            tune_for_serving()  # this process serves from now on (mesh.gctuning)
            log.info("running %s; Ctrl-C stops", ", ".join(f"{c.kind} {c.name}" for c in components) or "nothing")
            if banner is not None:
                print(banner(), flush=True)
            await stop.wait()
            log.info("stopping")
    finally:
        await asyncio.gather(*(c.stop() for c in started), return_exceptions=True)
    return EXIT_OK


def up_banner(
    settings: BrokerSettings,
    namespace: str,
    components: Sequence[Component],
    started_here: str | None,
    *,
    secure: bool = False,
) -> str:
    agents = [c.name for c in components if c.kind == "agent"]
    gateways = [f"{c.name} {getattr(c, 'public_url', '')}".rstrip() for c in components if c.kind == "gateway"]
    first = agents[0] if agents else "echo"
    broker_line = redact_url(settings.url) + (f" ({started_here})" if started_here else "")
    lines = [
        "mesh up: ready",
        f"  broker     {broker_line}",
        f"  namespace  {namespace}",
        f"  agents     {', '.join(agents) or 'none'}",
    ]
    if gateways:
        lines.append(f"  gateways   {', '.join(gateways)}")
    lines += [f"try:  mesh send {first} hi", "Ctrl-C stops everything."]
    if secure:
        lines[-2] += " --secure"
        if settings.port != 8883:
            lines[-2] += f" --broker {settings.url}"
    elif urlsplit(settings.url).port != 1883 or settings.host not in _LOCAL_HOSTS:
        lines[-2] += f" --broker {settings.url}"
    if namespace != "mesh":
        lines[-2] += f" --namespace {namespace}"
    return "\n".join(lines)
