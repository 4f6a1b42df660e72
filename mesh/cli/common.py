"""What every ``mesh`` command shares: broker/namespace options, exit codes, error reporting,
stopping on a signal."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mesh.broker import BROKER_URL_ENV, BrokerSettings, TlsOptions, check_tls_file, resolve_broker_url
from mesh.config.credentials import DEFAULT_CLIENT, PASSWORD_FILE_ENV
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
from mesh.redaction import redact_url
from topics import TopicError

if TYPE_CHECKING:
    import asyncio

    from mesh.trust import CardVerifier

# Every command's parser is built from this module at each start of `mesh` (`mesh --help` too), so
# it imports no pydantic, paho or broker tooling: what a command needs loads when it runs.

NAMESPACE_ENV = "MESH_NAMESPACE"
DEFAULT_NAMESPACE = "mesh"
CLIENT_NAME_ENV = "MESH_CLIENT_NAME"
CA_FILE_ENV = "MESH_BROKER_CA_FILE"
#: The public keys (a JWKS file) `mesh agents` and `mesh watch` accept cards signed by.
JWKS_ENV = "MESH_TRUST_JWKS"

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


def add_connection_options(
    parser: argparse.ArgumentParser,
    *,
    namespace: bool = True,
    secure_help: str | None = None,
    tls_insecure: bool = True,
) -> None:
    parser.add_argument(
        "--broker",
        metavar="URL",
        help=f"MQTT broker, mqtt[s]://[user:pass@]host[:port] (default: ${BROKER_URL_ENV}, then mqtt://localhost:1883)",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help=secure_help
        or (
            "insist on the secured broker of a `mesh up` running here, with its CA and this client's credentials "
            "(found without the flag too)"
        ),
    )
    add_tls_options(parser, insecure=tls_insecure)
    if namespace:
        parser.add_argument(
            "--client",
            metavar="NAME",
            default=os.environ.get(CLIENT_NAME_ENV, DEFAULT_CLIENT),
            help=f"broker user of this client under per-component passwords (default: ${CLIENT_NAME_ENV}, "
            f"then {DEFAULT_CLIENT!r})",
        )
        parser.add_argument(
            "--namespace",
            "-n",
            metavar="NS",
            default=os.environ.get(NAMESPACE_ENV, DEFAULT_NAMESPACE),
            help=f"topic namespace (default: ${NAMESPACE_ENV}, then {DEFAULT_NAMESPACE!r})",
        )


def add_tls_options(parser: argparse.ArgumentParser, *, insecure: bool = True) -> None:
    """``--ca-file``, ``--cert``, ``--key``, ``--insecure``: TLS for an ``mqtts://`` broker."""
    tls = parser.add_argument_group("TLS (mqtts:// brokers; also YAML tls: or URL ?ca_file=&cert=&key=)")
    tls.add_argument(
        "--ca-file",
        metavar="FILE",
        help=f"trust the CA certificate(s) of FILE (PEM) for the broker (default: ${CA_FILE_ENV}, then the "
        "system's CAs or $SSL_CERT_FILE)",
    )
    tls.add_argument("--cert", metavar="FILE", help="client certificate (PEM), for a broker that requires one")
    tls.add_argument("--key", metavar="FILE", help="private key (PEM) of --cert, unless it is in the same file")
    if not insecure:  # `mesh up --insecure` means the open mesh
        return
    tls.add_argument(
        "--insecure",
        action="store_true",
        default=None,
        help="DANGEROUS: do not verify the broker's certificate or name; anyone on the network path can pose "
        "as the broker and read everything (throwaway test brokers only; prefer --ca-file)",
    )


def _cli_tls(args: argparse.Namespace) -> TlsOptions:
    """The TLS options given on the command line (their files checked now, each error naming its option)."""
    files = {}
    for field, option, value in (
        ("ca_file", "--ca-file", getattr(args, "ca_file", None)),
        ("cert_file", "--cert", getattr(args, "cert", None)),
        ("key_file", "--key", getattr(args, "key", None)),
    ):
        if value is not None:
            files[field] = check_tls_file(value, option, field)
    return TlsOptions(insecure=bool(getattr(args, "insecure", False)), **files)


def broker_settings(
    args: argparse.Namespace, configured: str | None = None, configured_tls: TlsOptions | None = None
) -> BrokerSettings:
    """The broker of ``--broker`` / ``$MESH_BROKER_URL`` / the config, with the CA and password files of
    ``$MESH_BROKER_CA_FILE`` and ``$MESH_BROKER_PASSWORD_FILE``, else those of the secured ``mesh up`` of that broker.

    TLS options: ``--ca-file``/``--cert``/``--key``/``--insecure`` first, then ``$MESH_BROKER_CA_FILE``, the
    config's ``tls:`` (``configured_tls``) and last the URL's query."""
    namespace = getattr(args, "namespace", None)
    url = resolve_broker_url(args.broker, configured, namespace=namespace)
    ca_file = os.environ.get(CA_FILE_ENV) or None
    password_file = os.environ.get(PASSWORD_FILE_ENV) or None
    # The broker of a secured `mesh up` here: its CA and its components' credentials, found as
    # the broker is (mesh.brokertools.upstate), unless the environment names others.
    from mesh.brokertools.upstate import running_up_of_broker

    record = running_up_of_broker(url, namespace) if password_file is None else None
    if record is not None:
        password_file = record.credentials
        ca_file = ca_file or record.ca_file
    elif getattr(args, "secure", False) and password_file is None:
        raise ConfigError(
            f"--secure: no secured mesh up runs here with the broker {redact_url(url)}; start `mesh up` first (with "
            "the same MESH_STATE_DIR), or connect with --broker and MESH_BROKER_PASSWORD_FILE instead"
        )
    return settings_for_url(args, url, ca_file=ca_file, password_file=password_file, configured_tls=configured_tls)


def settings_for_url(
    args: argparse.Namespace,
    url: str,
    *,
    ca_file: str | None = None,
    password_file: str | None = None,
    configured_tls: TlsOptions | None = None,
) -> BrokerSettings:
    """The settings of ``url`` with the command's TLS options over ``ca_file`` and ``configured_tls``."""
    given = _cli_tls(args)
    if urlsplit(url).scheme.lower() in ("mqtts", "ssl"):
        if ca_file and not given.ca_file:
            check_tls_file(ca_file, CA_FILE_ENV if not getattr(args, "secure", False) else "--secure", "ca_file")
        tls: TlsOptions | None = given.over(TlsOptions(ca_file=ca_file).over(configured_tls))
    elif not given.is_empty:
        raise ConfigError(
            f"--ca-file / --cert / --key / --insecure are TLS options, but the broker {redact_url(url)} is plain "
            "mqtt://; use an mqtts:// URL (--broker mqtts://host:8883), or drop them"
        )
    else:
        tls = None  # $MESH_BROKER_CA_FILE and a config's tls: apply to mqtts:// brokers only
    settings = BrokerSettings.from_url(url, tls=tls, password_file=password_file)
    if settings.tls is not None and settings.tls.insecure:
        print(
            "mesh: WARNING: TLS verification is off (--insecure / insecure): the broker's certificate and name "
            "are not checked, so anyone on the network path can pose as the broker; use --ca-file instead",
            file=sys.stderr,
        )
    return settings


def card_verifier(settings: BrokerSettings, namespace: str | None) -> CardVerifier | None:
    """What a watching command checks cards with: the keys of ``$MESH_TRUST_JWKS``, else those of
    the secured ``mesh up`` of the broker (its ``jwks.json``), followed while the command runs (a
    component enrolled later is trusted); None: no trust store, every valid card."""
    from mesh.brokertools.upstate import running_up_of_broker

    jwks = os.environ.get(JWKS_ENV) or None
    if jwks is None:
        record = running_up_of_broker(settings.url, namespace)
        if record is None or not record.keys:
            return None
        jwks = os.path.join(record.keys, "jwks.json")
    from mesh.trust import CardVerifier, TrustedKeys  # the JOSE library loads only under trust

    return CardVerifier(TrustedKeys(Path(jwks)))


def client_settings(args: argparse.Namespace) -> BrokerSettings:
    """:func:`broker_settings` for a client command: connected as the ``--client`` user if passwords are set."""
    return broker_settings(args).for_identity(args.client)


def broker_is_one_node(settings: BrokerSettings) -> bool:
    """Whether the broker is the Mosquitto a live ``mesh up`` started (mesh.brokertools.upstate)."""
    from mesh.brokertools.upstate import broker_started_by_up

    return broker_started_by_up(settings.url)


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
    from mesh.a2a import RpcError
    from mesh.brokertools.localbroker import BrokerUnavailableError

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
    from mesh.a2a import RpcError
    from mesh.brokertools.refusals import refusal_fix

    if isinstance(exc, RpcError):
        return f"the agent answered with error {exc.code}: {exc.error.message}"
    fix = refusal_fix(exc)  # the broker refused this command's identity: what to do about it
    said = str(exc)
    if fix:  # instead of the transport's guess (which knows no mesh up nor state dir)
        said = f"{said.removesuffix(exc.hint) if isinstance(exc, ConnectError) else said}; {fix}"
    notes = getattr(exc, "__notes__", None) or []  # e.g. which broker and namespace a command asked
    return "; ".join([said, *notes])


@contextlib.contextmanager
def stopped_by_signals(stop: asyncio.Event) -> Iterator[None]:
    """Set ``stop`` on SIGINT / SIGTERM / SIGHUP inside the block; a second Ctrl-C after it interrupts."""
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    stopping = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: its terminal closed
    for sig in stopping:
        loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in stopping:
            loop.remove_signal_handler(sig)
