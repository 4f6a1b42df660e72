"""What ``mesh run FILE...`` and ``mesh up`` do: start components and serve until Ctrl-C / SIGTERM
(their arguments: :mod:`mesh.cli.run_commands`)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path

from mesh.broker import BROKER_URL_ENV, BrokerSettings, resolve_broker_url
from mesh.brokertools.brokerfiles import CREDENTIALS_DIR, identities_of
from mesh.brokertools.joining import local_up
from mesh.brokertools.upstate import UpClaim, UpRecord, running_up_broker_url, running_up_with_broker, up_files
from mesh.cli.broker_commands import secure_broker
from mesh.cli.common import (
    EXIT_OK,
    NAMESPACE_ENV,
    broker_settings,
    configure_logging,
    settings_for_url,
    stopped_by_signals,
)
from mesh.cli.gctuning import tune_for_serving
from mesh.cli.run_commands import mesh_command
from mesh.cli.up_assistant import write_assistant_config
from mesh.cli.up_broker import broker_for_up, check_gateway_ports
from mesh.cli.up_edge import banner_lines, up_api_key, with_api_key
from mesh.cli.up_secure import INSECURE_WARNING, admin_file, secured_url, with_secure_trust
from mesh.cli.up_secure import clients as up_clients
from mesh.cli.up_secure import probes as up_probes
from mesh.component import Component
from mesh.config import MeshConfig, configured_broker, configured_tls, load_many
from mesh.config.sections import MissingDependencyError, build_components, build_many, check_unique_components
from mesh.config.statedir import STATE_DIR_ENV, default_state_dir
from mesh.errors import ConfigError, ConnectError
from mesh.redaction import redact_url
from mesh.telemetry import tracing
from topics import validate_namespace

log = logging.getLogger(__name__)

UP_GROUP = "mesh.up"  # entry points naming the config files `mesh up` runs


async def run(args: argparse.Namespace) -> int:
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
    if (warning := open_broker_warning(broker)) is not None:
        log.warning(warning)
    configs = await _joined(configs, broker)
    try:
        if args.metrics_port is None:
            return await serve(build_many(configs, broker))
        from mesh.telemetry.exposition import serve_metrics  # prometheus_client loads only when asked

        async with serve_metrics(args.metrics_port):
            return await serve(build_many(configs, broker))
    except ConnectError as exc:
        if broker.password_file is not None or broker.username is not None or "Not authorized" not in str(exc):
            raise
        raise ConnectError(
            f"the broker at {redact_url(broker.url)} refused the connection (Not authorized): it is secured and "
            "these components have no credentials. A `mesh up` running here keeps them in "
            f"{up_files(configs[0].namespace).secure_dir / CREDENTIALS_DIR} (mesh run finds them itself, with the "
            "same MESH_STATE_DIR); for another broker, point MESH_BROKER_PASSWORD_FILE at the credentials directory "
            "`mesh broker-config FILE... --out DIR` wrote (DIR/credentials)"
        ) from None


def open_broker_warning(broker: BrokerSettings) -> str | None:
    """What ``mesh run`` says once when it is about to join, without credentials, a broker that
    no ``mesh up`` here uses: whatever answers there (someone else's broker on localhost:1883)
    gets the open mesh. None: it has credentials, or it joins the open ``mesh up --insecure``
    running here (which warns on its own)."""
    certificate = broker.tls is not None and broker.tls.cert_file is not None
    if broker.username is not None or broker.password_file is not None or certificate:
        return None
    if running_up_with_broker(broker.url) is not None:
        return None
    return (
        f"no `mesh up` runs here with the broker {redact_url(broker.url)} (state dir {default_state_dir()}): "
        "connecting to it anonymously, as the open mesh: whoever runs that broker, or reaches it, can read "
        "and answer these components' tasks. For the secured mesh, start `mesh up` first (as this user, with "
        f"the same {STATE_DIR_ENV}) and run this again: it joins it; for another secured broker give credentials "
        "(--broker mqtt://USER:PASS@HOST, or MESH_BROKER_PASSWORD_FILE)"
    )


async def _joined(configs: list[MeshConfig], broker: BrokerSettings) -> list[MeshConfig]:
    """``configs``, their components given users of their own on the secured broker of a ``mesh up``
    running here, and signing keys every registry there trusts, when that is the broker they use
    (mesh.brokertools.joining)."""
    up = local_up(broker, configs[0].namespace)
    if up is None:
        return configs
    from mesh.brokertools.enroll import enroll

    secured = with_secure_trust(configs, up.keys)  # the keys first: their cards are trusted as they come
    await enroll(broker, up.admin_file, up.credentials, identities_of(configs, up_clients()))
    return secured


async def up(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    environ = {**os.environ, NAMESPACE_ENV: args.namespace}
    examples = up_configs()
    with tempfile.TemporaryDirectory(prefix="mesh-up-") as scratch:
        assistant = [write_assistant_config(args.model, Path(scratch))] if args.model else []
        configs = load_many([*examples, *assistant, *args.config], environ=environ)
    if args.open_mesh:
        log.warning(INSECURE_WARNING)
    # Before anything starts: a live `mesh up` of the namespace, or a taken gateway port, ends
    # the run here (exit 2), having started, and so cleared, nothing.
    claim = UpClaim.take(args.namespace)
    try:
        check_gateway_ports(configs)
        if not args.open_mesh:
            return await _up_secured(args, claim, configs, examples)
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


async def _up_secured(args: argparse.Namespace, claim: UpClaim, configs: list[MeshConfig], examples: list[Path]) -> int:
    """Start a broker under the mesh's rules and the components, each as its own user (mesh.cli.up_secure)."""
    url = secured_url(args.broker, tls=args.secure)
    directory = claim.files.secure_dir
    credentials = directory / CREDENTIALS_DIR
    configs = with_secure_trust(configs, credentials)  # each signing key beside its component's password
    api_key = up_api_key(args.namespace)  # the HTTP edge asks for it (mesh.cli.up_edge)
    configs = with_api_key(configs, api_key)
    started: list[int | None] = []
    with secure_broker(
        url,
        configs,
        up_clients(),
        probes=up_probes(),
        directory=directory,
        started=lambda broker: started.append(broker.pid),
        workdir=claim.files.broker_dir,  # what a killed mesh up leaves, the next one cleans
    ) as settings:
        record = UpRecord(
            os.getpid(),
            args.namespace,
            settings.url,
            broker_pid=started[0],
            secure=True,
            credentials=str(credentials),
            ca_file=settings.tls.ca_file if settings.tls is not None else None,
            admin_file=str(admin_file(credentials)),
            keys=str(credentials),
            api_key_file=str(api_key.path),
        )
        claim.write(record)
        components, missing = build_up(configs, settings, examples)
        how = "started here under the mesh's rules: a broker user per component" + (", TLS" if settings.tls else "")
        how += f"; credentials in {credentials}"

        def ready() -> str:
            gateways = [str(getattr(c, "public_url", c.name)) for c in components if c.kind == "gateway"]
            claim.write(dataclasses.replace(record, gateways=gateways))
            edge = banner_lines(api_key) if gateways else []
            return up_banner(settings, args.namespace, components, how, missing=missing, edge=edge)

        return await serve(components, banner=ready)


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
            tune_for_serving()  # this process serves from now on (mesh.cli.gctuning)
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
    missing: Sequence[str] = (),
    edge: Sequence[str] = (),
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
    chats = [f"{getattr(c, 'public_url', '')}/chat" for c in components if getattr(c, "serves_chat", False)]
    if chats:
        lines.append(f"  chat       {', '.join(chats)}")
    lines += edge  # the HTTP edge's API key (a secured mesh up)
    lines += [f"  not run    {hint}" for hint in missing]
    lines += [f"try:  {mesh_command()} send {first} hi", "Ctrl-C stops everything."]
    if os.environ.get(BROKER_URL_ENV, settings.url) != settings.url:
        # Other commands find this broker in the state file (mesh.brokertools.upstate),
        # unless the variable points elsewhere.
        lines[-2] += f" --broker {settings.url}"
    if namespace != "mesh":
        lines[-2] += f" --namespace {namespace}"
    return "\n".join(lines)
