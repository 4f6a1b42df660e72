"""The secured ``mesh up`` (the default; DESIGN, "Secure by default").

With no flag, ``mesh up`` starts its own Mosquitto (plain MQTT on the loopback interface; with
``--secure`` or an ``mqtts://`` URL, TLS with a private CA) under generated dynamic-security
rules: a broker user per component and one for the CLI (client rights only), each password in a
file of its own (0600), a signing key per component, every card signed and checked, user tokens
verified by the agents, and the orchestrator asking only the signed agents started with it.
Everything lives in ``<state dir>/up/<namespace>.mosquitto/secure`` and goes with the broker;
the other commands find the broker and the CLI's credentials through the state file.

A broker that already answers where ``mesh up`` would start its own cannot be put under the
rules: the default address (nothing asked for) moves to the next free port, an address asked
for is refused, naming ``--insecure``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from mesh.broker import BROKER_URL_ENV, DEFAULT_BROKER_URL
from mesh.brokertools.brokerfiles import ADMIN_FILE, DEFAULT_CLIENT, SECURE_BROKER_URL, identities_of
from mesh.brokertools.localbroker import free_port, port_answers
from mesh.brokertools.localtrust import add_components, trust_settings
from mesh.config import MeshConfig
from mesh.config.credentials import DOCTOR_USER
from mesh.errors import ConfigError, ConnectError
from mesh.redaction import redact_url

__all__ = ["INSECURE_WARNING", "admin_file", "secured_url", "with_secure_trust"]

log = logging.getLogger(__name__)

LOCAL_HOSTS = ("localhost", "127.0.0.1")

INSECURE_WARNING = (
    "mesh up --insecure: the broker takes anonymous connections and nothing is signed; anyone who reaches it "
    "can read every request and answer, pose as any agent or answer, and remove agents. Leave --insecure out "
    "for per-component users, signed cards and user tokens"
)


def secured_url(explicit: str | None, *, tls: bool) -> str:
    """Where the secured ``mesh up`` starts its broker: the URL asked for (refused if something
    answers there), else the default, moved to a free port when something answers there."""
    asked = explicit or os.environ.get(BROKER_URL_ENV)
    url = asked or (SECURE_BROKER_URL if tls else DEFAULT_BROKER_URL)
    parts = urlsplit(url)
    if tls and parts.scheme == "mqtt":
        parts = parts._replace(scheme="mqtts")
    host, port = parts.hostname or "localhost", parts.port or (8883 if parts.scheme == "mqtts" else 1883)
    if host not in LOCAL_HOSTS or parts.username or parts.scheme not in ("mqtt", "mqtts"):
        raise ConfigError(
            f"mesh up starts its own broker on this machine under the mesh's rules, not {redact_url(url)!r}; "
            "pass --broker mqtt://localhost:PORT (mqtts://localhost:PORT with --secure), or run open on that broker "
            "with `mesh up --insecure`"
        )
    if not port_answers(host, port):
        return urlunsplit(parts)
    if asked:
        raise ConnectError(
            f"a broker already answers at {url}; mesh up secures only a broker it starts itself (users, rules): "
            "leave --broker / $MESH_BROKER_URL out or name a free port, or run open on that broker with "
            "`mesh up --insecure`"
        )
    beside = port + 1 if port < 65535 and not port_answers(host, port + 1) else free_port()
    log.info("a broker already answers at %s; mesh up starts its own, under the mesh's rules, on port %d", url, beside)
    return urlunsplit(parts._replace(netloc=f"{host}:{beside}"))


def admin_file(credentials: Path) -> Path:
    """The admin user's password file of the secured broker whose credentials are in ``credentials``."""
    return credentials.parent / ADMIN_FILE


def with_secure_trust(configs: Sequence[MeshConfig], keys_dir: Path) -> list[MeshConfig]:
    """``configs`` with signed cards and user tokens on: a key per component in ``keys_dir``, every
    card signed and checked against the keys there, the gateways' user tokens verified
    (mesh.brokertools.localtrust: both re-read when a component joins later).

    A config that has its own ``trust:`` keeps it.
    """
    add_components(keys_dir, identities_of(configs, clients()))  # the CLI signs its requests too
    trust = trust_settings(keys_dir)
    return [config if config.trust is not None else dataclasses.replace(config, trust=trust) for config in configs]


def clients() -> list[str]:
    """The CLI users of a secured ``mesh up``."""
    return [DEFAULT_CLIENT]


def probes() -> list[str]:
    """The probe users of a secured ``mesh up`` (``mesh doctor``'s)."""
    return [DOCTOR_USER]
