"""``mesh broker-config`` and the broker of ``mesh up --secure``: per-component users and rules."""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from mesh.broker import BrokerSettings, TlsOptions
from mesh.cli.common import EXIT_OK, configure_logging
from mesh.config.credentials import DEFAULT_CLIENT
from mesh.errors import ConfigError

if TYPE_CHECKING:  # loaded when a command runs, not to build mesh's parser
    from mesh.brokertools.localbroker import LocalBroker
    from mesh.config import MeshConfig

log = logging.getLogger(__name__)

_LOCAL_HOSTS = ("localhost", "127.0.0.1")
_PROBLEM = re.compile(r"\b(error|warning)\b", re.IGNORECASE)  # Mosquitto's "Error: ..." and "Warning: ..." lines
# What Mosquitto says when it keeps running as root: LocalBroker(die_with_parent=True) asks for that.
_CHOSEN_ROOT = re.compile(r"should not be run as root", re.IGNORECASE)
# A client's own failure (LocalBroker.start's port probe on a TLS listener logs "Client connection
# from ... failed: ... unexpected eof"), not the broker's: it may land in the log before we read it.
_CLIENT_EVENT = re.compile(r"^\S+: (Client |New connection |New client |Socket error on client |OpenSSL Error)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = subparsers.add_parser(
        "broker-config",
        help="write a broker's users, passwords and least-privilege rules for the components of config files",
        description=(
            "Give every agent and gateway of the config files (and each --client) a Mosquitto user of its own "
            "name with only the rights it needs (dynamic-security plugin). Writes dynamic-security.json, "
            "credentials/<name> (0600, one per component; it reads its own through "
            "MESH_BROKER_PASSWORD_FILE=DIR/credentials) and mosquitto-security.conf "
            "(lines to append to mosquitto.conf) to --out. Passwords already there are kept."
        ),
    )
    config.add_argument("files", nargs="+", type=Path, metavar="FILE", help="mesh config file (YAML)")
    config.add_argument("--out", required=True, type=Path, metavar="DIR", help="directory to write the files to")
    config.add_argument(
        "--client",
        action="append",
        metavar="NAME",
        help=f"a CLI client's broker user (repeatable; default: {DEFAULT_CLIENT!r})",
    )
    config.add_argument(
        "--sdk-client",
        action="append",
        default=[],
        metavar="NAME",
        help="a broker user with client rights for a third-party client that picks its own client ids (the EMQX "
        "profile's SDK); unlike every other user it is not bound to a client id (repeatable)",
    )
    config.add_argument("--plugin", metavar="PATH", help="the broker's mosquitto_dynamic_security.so (default: found)")
    config.add_argument(
        "--broker-path",
        metavar="DIR",
        help="where the broker sees --out (e.g. /mosquitto/config in a container; default: --out itself)",
    )
    config.add_argument(
        "--tls-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also make a private CA and a certificate for the broker under these host names (repeatable)",
    )
    config.set_defaults(handler=_broker_config)


async def _broker_config(args: argparse.Namespace) -> int:
    from mesh.brokertools.brokerfiles import identities_of, write_broker_files
    from mesh.config import load_many

    configure_logging("warning")
    configs = load_many(args.files)
    identities = identities_of(configs, args.client or [DEFAULT_CLIENT], sdk_clients=args.sdk_client)
    files = write_broker_files(
        args.out, identities, plugin=args.plugin, broker_path=args.broker_path, tls_hosts=args.tls_host
    )
    users = ", ".join(sorted({f"{i.kind} {i.name}" for i in identities}))
    print(f"broker users: {users}")
    print(f"wrote {files.dynsec}, {files.passwords}/<name> (each component's own, keep them secret), {files.conf}")
    if files.certificates is not None:
        print(f"TLS: {files.certificates.server_cert}; components trust {files.certificates.ca_cert}")
    return EXIT_OK


@contextlib.contextmanager
def secure_broker(
    url: str,
    configs: Sequence[MeshConfig],
    clients: Sequence[str],
    *,
    probes: Sequence[str] = (),
    directory: Path,
    started: Callable[[LocalBroker], None] | None = None,
    workdir: Path | None = None,
) -> Iterator[BrokerSettings]:
    """Start ``mesh up``'s Mosquitto at ``url`` (this machine) under the rules of ``configs``.

    ``mqtts://``: TLS with a private CA; ``mqtt://``: plain MQTT on the loopback interface.
    The users, rules, credentials (one file per component) and an admin user's password go to
    ``directory``. Yields the settings the components connect with, each as its own user
    (:meth:`BrokerSettings.for_identity`).
    """
    from mesh.brokertools.brokerfiles import identities_of, local_broker_config, write_broker_files
    from mesh.brokertools.localbroker import LocalBroker, default_config_path

    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "mqtts") or parts.hostname not in _LOCAL_HOSTS or parts.username:
        raise ConfigError(
            f"mesh up starts its own broker on this machine under the mesh's rules, not {url!r}; pass --broker "
            "mqtt://localhost:PORT (or mqtts://localhost:PORT with --secure), or --insecure to use that broker as it is"
        )
    tls = parts.scheme == "mqtts"
    settings = BrokerSettings.from_url(url)
    files = write_broker_files(
        directory, identities_of(configs, clients, probes=probes), tls_hosts=_LOCAL_HOSTS if tls else (), admin=True
    )
    extra_config, rules_copy = local_broker_config(files)
    try:
        # It dies with this process, however it dies (kill -9 included), as mesh up's own broker does.
        broker = LocalBroker(
            default_config_path(), port=settings.port, extra_config=extra_config, workdir=workdir, die_with_parent=True
        )
        try:
            broker.start()
            check_broker_log(broker, files.dynsec)
            if started is not None:
                started(broker)
            ca = TlsOptions(ca_file=str(files.certificates.ca_cert)) if files.certificates is not None else None
            yield BrokerSettings.from_url(url, tls=ca, password_file=str(files.passwords))
        finally:
            broker.remove()
    finally:
        if rules_copy is not None:
            shutil.rmtree(rules_copy, ignore_errors=True)


def check_broker_log(broker: LocalBroker, rules: Path) -> None:
    """Raise if Mosquitto logged an error or a warning starting with the generated files."""
    from mesh.brokertools.localbroker import BrokerUnavailableError

    # The plugin reports an unreadable rules file in the log and the broker runs on, refusing everyone.
    problems = [
        line
        for line in broker.log_file.read_text().splitlines()
        if _PROBLEM.search(line) and not _CHOSEN_ROOT.search(line) and not _CLIENT_EVENT.search(line)
    ]
    if problems:
        raise BrokerUnavailableError(f"Mosquitto did not accept the generated rules ({rules}): {' | '.join(problems)}")
