"""``mesh run FILE...`` and ``mesh up``: start components and serve until Ctrl-C / SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path

from mesh.broker import BROKER_URL_ENV, BrokerSettings, resolve_broker_url
from mesh.brokertools.brokerfiles import SECURE_BROKER_URL, identities_of, secure_state_dir
from mesh.brokertools.upstate import UpClaim, UpRecord, running_up_broker_url
from mesh.cli.broker_commands import secure_broker
from mesh.cli.common import (
    EXIT_OK,
    NAMESPACE_ENV,
    add_connection_options,
    broker_settings,
    configure_logging,
    settings_for_url,
    stopped_by_signals,
)
from mesh.cli.up_broker import broker_for_up, check_gateway_ports
from mesh.component import Component
from mesh.config import LOG_LEVELS, MeshConfig, configured_broker, configured_tls, load_many
from mesh.errors import ConfigError
from mesh.gctuning import tune_for_serving
from mesh.redaction import redact_url
from mesh.sections import MissingDependencyError, build_components, build_many, check_unique_components
from mesh.telemetry import tracing
from topics import validate_namespace

log = logging.getLogger(__name__)

UP_GROUP = "mesh.up"  # entry points naming the config files `mesh up` runs


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = subparsers.add_parser(
        "run",
        help="run the agents and gateways described in config files",
        description="Run every agent and gateway of the given YAML files in this process until Ctrl-C.",
    )
    run.add_argument("files", nargs="+", type=Path, metavar="FILE", help="mesh config file (YAML)")
    run.add_argument("--log-level", choices=LOG_LEVELS, help="override the files' log_level")
    run.add_argument(
        "--namespace",
        "-n",
        metavar="NS",
        default=os.environ.get(NAMESPACE_ENV) or None,
        help=f"run every component on this namespace, whatever the files say (default: ${NAMESPACE_ENV}, "
        "then each file's namespace); as --broker and $MESH_BROKER_URL over the files' broker",
    )
    run.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="serve Prometheus metrics at http://0.0.0.0:PORT/metrics"
    )
    add_connection_options(run, namespace=False)
    run.set_defaults(handler=_run)

    up = subparsers.add_parser(
        "up",
        help="start a local Mosquitto if needed, the example agents and the HTTP gateway",
        description=(
            "Use the broker at --broker / $MESH_BROKER_URL (default mqtt://localhost:1883) if it relays a request "
            "in a few ms, else start Mosquitto from mosquitto.conf (on the next port when a slow broker holds "
            "that one), then run the example agents and the HTTP gateway until Ctrl-C. Other mesh commands find "
            "that broker without flags; one mesh up per namespace."
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
            raise ConfigError(f"--namespace / ${NAMESPACE_ENV}: {exc}") from exc
        configs = [dataclasses.replace(config, namespace=namespace) for config in configs]
    if not any(entries for config in configs for entries in config.sections.values()):
        names = ", ".join(str(f) for f in args.files)
        raise ConfigError(f"{names}: nothing to run; add an 'agents:' or 'gateways:' section")
    configure_logging(args.log_level or configs[0].log_level)
    # The broker of a running `mesh up` of the namespace, if the files and $MESH_BROKER_URL name none.
    configured = configured_broker(configs) or running_up_broker_url(configs[0].namespace)
    broker = broker_settings(args, configured, configured_tls(configs))
    if args.metrics_port is None:
        return await serve(build_many(configs, broker))
    from mesh.telemetry.exposition import serve_metrics  # prometheus_client loads only when asked

    async with serve_metrics(args.metrics_port):
        return await serve(build_many(configs, broker))


async def _up(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    environ = {**os.environ, NAMESPACE_ENV: args.namespace}
    examples = up_configs()
    configs = load_many([*examples, *args.config], environ=environ)
    # Before anything starts: a live `mesh up` of the namespace, or a taken gateway port, ends
    # the run here (exit 2), having started, and so cleared, nothing.
    claim = UpClaim.take(args.namespace)
    try:
        check_gateway_ports(configs)
        if args.secure:
            configs = with_secure_trust(configs, secure_state_dir() / "keys")
            started: list[int | None] = []
            with secure_broker(
                args.broker or SECURE_BROKER_URL,
                configs,
                [args.client],
                started=lambda broker: started.append(broker.pid),
                workdir=claim.files.broker_dir,  # what a killed mesh up leaves, the next one cleans
            ) as settings:
                record = UpRecord(os.getpid(), args.namespace, settings.url, broker_pid=started[0], secure=True)
                claim.write(record)
                components = build_many(configs, settings)
                how = f"started here with TLS and per-component users, files in {secure_state_dir()}"
                return await serve(
                    components, banner=lambda: up_banner(settings, args.namespace, components, how, secure=True)
                )
        settings = settings_for_url(args, resolve_broker_url(args.broker))  # with --ca-file, --cert...
        async with broker_for_up(settings, claim) as broker:
            components, missing = build_up(configs, broker.settings, examples)

            def ready() -> str:
                gateways = [str(getattr(c, "public_url", c.name)) for c in components if c.kind == "gateway"]
                claim.write(broker.record(args.namespace, gateways))
                return up_banner(broker.settings, args.namespace, components, broker.how, missing=missing)

            return await serve(components, banner=ready)
    finally:
        claim.release()


def build_up(
    configs: Sequence[MeshConfig], settings: BrokerSettings, examples: Sequence[Path]
) -> tuple[list[Component], list[str]]:
    """Build the components, leaving out an example whose extra is not installed (e.g. the HTTP
    gateway without ``http``); also returns how to install what was left out."""
    built: list[tuple[MeshConfig, list[Component]]] = []
    missing: list[str] = []
    for config in configs:
        try:
            built.append((config, build_components(config, settings)))
        except MissingDependencyError as exc:
            if config.source not in examples:
                raise  # a file the user asked for runs whole, or not at all
            log.warning("not running %s: %s", config.source.name, exc.hint)
            missing.append(exc.hint)
    check_unique_components(built)
    return [component for _, components in built for component in components], missing


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


async def serve(components: Sequence[Component], *, banner: Callable[[], str] | None = None) -> int:
    """Start every component, wait for SIGINT/SIGTERM, then stop them all cleanly."""
    tracing.enable_from_environment()  # OTEL_EXPORTER_OTLP_*ENDPOINT set: spans (mesh.telemetry.otel)
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


def mesh_command() -> str:
    """How the user can type ``mesh``: the bare name when it is on PATH, else the path they ran
    (``.venv/bin/mesh``, as the README's commands do)."""
    ran = Path(sys.argv[0])
    if ran.name != "mesh":  # python -m mesh.cli
        return "mesh" if shutil.which("mesh") else f"{Path(sys.executable).name} -m mesh.cli"
    on_path = shutil.which("mesh")
    if on_path is not None and Path(on_path).resolve() == ran.resolve():
        return "mesh"
    try:
        return os.path.relpath(ran) if not ran.is_absolute() or ran.is_relative_to(Path.cwd()) else str(ran)
    except ValueError:
        return str(ran)


def up_banner(
    settings: BrokerSettings,
    namespace: str,
    components: Sequence[Component],
    started_here: str | None,
    *,
    secure: bool = False,
    missing: Sequence[str] = (),
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
    dashboards = [
        f"{getattr(c, 'public_url', '')}/ui"
        for c in components
        if c.kind == "gateway" and getattr(c, "serves_dashboard", False)
    ]
    if dashboards:
        lines.append(f"  dashboard  {', '.join(dashboards)}")
    lines += [f"  not run    {hint}" for hint in missing]
    lines += [f"try:  {mesh_command()} send {first} hi", "Ctrl-C stops everything."]
    if secure:
        lines[-2] += " --secure"
        if settings.port != 8883:
            lines[-2] += f" --broker {settings.url}"
    elif os.environ.get(BROKER_URL_ENV, settings.url) != settings.url:
        # Other commands find this broker in the state file (mesh.brokertools.upstate),
        # unless the variable points elsewhere.
        lines[-2] += f" --broker {settings.url}"
    if namespace != "mesh":
        lines[-2] += f" --namespace {namespace}"
    return "\n".join(lines)
