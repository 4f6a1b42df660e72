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

import copy
import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from mesh.broker import BROKER_URL_ENV, DEFAULT_BROKER_URL
from mesh.brokertools.brokerfiles import ADMIN_FILE, DEFAULT_CLIENT, SECURE_BROKER_URL, identities_of
from mesh.brokertools.localbroker import free_port, port_answers
from mesh.config import MeshConfig
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
_ORCHESTRATOR_CLASS = "OrchestratorAgent"


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
    card signed and checked, the gateways' user tokens verified, and an orchestrator without an
    allow list of its own asking only the agents started with it.

    A config that has its own ``trust:`` keeps it.
    """
    from mesh.trust import generate_keys  # the JOSE library loads only when keys are made

    identities = identities_of(configs, ())
    generate_keys(keys_dir, [identity.name for identity in identities])
    issuers = sorted({identity.name for identity in identities if identity.kind == "gateway"})
    trust = {"keys": str(keys_dir), "token_issuers": issuers}
    agents = sorted(identity.name for identity in identities if identity.kind == "agent")
    secured = []
    for config in configs:
        if config.trust is None:
            config = dataclasses.replace(config, trust=trust)
        secured.append(_with_allow_list(config, agents))
    return secured


def _with_allow_list(config: MeshConfig, agents: Sequence[str]) -> MeshConfig:
    """An orchestrator entry with no ``allow``/``allow_tags`` gets the started agents as its allow list."""
    entries = config.sections.get("agents")
    if not isinstance(entries, list):
        return config
    changed = False
    updated: list[object] = []
    for entry in entries:
        if isinstance(entry, Mapping) and str(entry.get("class", "")).endswith(_ORCHESTRATOR_CLASS):
            options = entry.get("config") or {}
            if isinstance(options, Mapping) and "allow" not in options and "allow_tags" not in options:
                own = str(entry.get("name") or "orchestrator")
                entry = {**copy.deepcopy(dict(entry)), "config": {**options, "allow": [a for a in agents if a != own]}}
                changed = True
        updated.append(entry)
    if not changed:
        return config
    return dataclasses.replace(config, sections={**config.sections, "agents": updated})


def clients() -> list[str]:
    """The CLI users of a secured ``mesh up``."""
    return [DEFAULT_CLIENT]
