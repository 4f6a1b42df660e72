"""The files that put a broker under the mesh's rules (``mesh broker-config``, ``mesh up --secure``).

From the components of mesh configs (and the CLI clients named), a directory gets:

==========================  ====  ==========================================================
``dynamic-security.json``   0600  users, password hashes and rules (Mosquitto's dynamic-security plugin)
``credentials/<name>``      0600  one file per component: its ``name:password`` (and nothing else)
``credentials/<name>.slots``      how many client ids a user with slots may use at once (the CLI user, replicas)
``mosquitto-security.conf``       the lines to append to mosquitto.conf after its ``listener``
``ca.crt`` ``server.*``           with TLS host names: a private CA and the broker's certificate
==========================  ====  ==========================================================

Passwords already in the directory are kept for the names still there, so running it again
after adding an agent does not lock the others out. A ``passwords`` file of an older version
(every password in one file) is read once, then removed: no component should hold another's.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import Identity, Kind, bound_users, rules_by_user, slot_counts
from mesh.brokertools.dynsec import ADMIN_USER, dynsec_config
from mesh.brokertools.tlscerts import Certificates, ensure_certificates
from mesh.clientids import write_slots
from mesh.config import MeshConfig
from mesh.config.credentials import (
    DEFAULT_CLIENT,
    new_password,
    read_credentials,
    read_passwords,
    write_credentials,
    write_private_file,
)
from mesh.config.sections import build_many
from mesh.config.statedir import default_state_dir
from mesh.errors import ConfigError

__all__ = [
    "DEFAULT_CLIENT",
    "SECURE_BROKER_URL",
    "BrokerFiles",
    "find_dynsec_plugin",
    "identities_of",
    "local_broker_config",
    "secure_state_dir",
    "write_broker_files",
]

#: Where ``mesh up --secure`` runs its broker unless told otherwise.
SECURE_BROKER_URL = "mqtts://localhost:8883"
DYNSEC_FILE = "dynamic-security.json"
CREDENTIALS_DIR = "credentials"
ADMIN_FILE = "admin"
_OLD_PASSWORD_FILE = "passwords"  # noqa: S105 - a file name, not a password
CONF_FILE = "mosquitto-security.conf"
_PLUGIN = "mosquitto_dynamic_security.so"
_PLUGIN_DIRS = ("/usr/lib/*", "/usr/lib", "/usr/local/lib", "/opt/homebrew/lib", "/usr/local/opt/mosquitto/lib")


@dataclass(frozen=True, slots=True)
class BrokerFiles:
    """What :func:`write_broker_files` wrote."""

    dynsec: Path
    #: The credentials directory: ``<name>`` per component (what ``password_file`` names).
    passwords: Path
    conf: Path
    certificates: Certificates | None
    plugin: str


def secure_state_dir() -> Path:
    """Where ``mesh up --secure`` keeps its broker's files (and ``--secure`` clients find them)."""
    return default_state_dir() / "secure"


def identities_of(
    configs: Sequence[MeshConfig],
    clients: Sequence[str] = (DEFAULT_CLIENT,),
    *,
    sdk_clients: Sequence[str] = (),
    probes: Sequence[str] = (),
) -> list[Identity]:
    """Every component of ``configs`` (built, never started, to learn its name), the ``clients``,
    the ``sdk_clients`` (clients left unbound: third-party code that picks its own client ids) and
    the ``probes`` (``mesh doctor``'s users: scratch topics only, in no namespace)."""
    probe = BrokerSettings()  # nothing connects: building only names the components
    found: list[Identity] = []
    namespaces: list[str] = []
    for config in configs:
        namespaces.append(config.namespace)
        for component in build_many([config], probe):
            if component.kind == "scheduler":  # connects as one of the clients (mesh.schedules.scheduler)
                continue
            kind: Kind = "gateway" if component.kind == "gateway" else "agent"
            # An agent serving the EMQX profile names its scope there (a second broker user).
            scope = getattr(component, "profile_scope", None)
            replica = bool(getattr(getattr(component, "settings", None), "shared_subscription", False))
            found.append(Identity(kind, component.name, config.namespace, profile=scope, replica=replica))
    for namespace in dict.fromkeys(namespaces):
        found += [Identity("client", client, namespace) for client in clients]
        found += [Identity("client", client, namespace, unbound=True) for client in sdk_clients]
    if namespaces:  # a probe's rules name no namespace; its identity still carries one
        found += [Identity("probe", probe, namespaces[0]) for probe in probes]
    return found


def write_broker_files(
    directory: Path,
    identities: Sequence[Identity],
    *,
    plugin: str | None = None,
    broker_path: str | None = None,
    tls_hosts: Sequence[str] = (),
    admin: bool = False,
) -> BrokerFiles:
    """Write the rules, passwords and config lines for ``identities`` into ``directory``.

    ``broker_path`` is where the broker will find the directory (a container mount; default: the
    directory itself). With ``admin``, an admin user that may add users while the broker runs
    (``mesh up``), its ``name:password`` in ``admin`` (0600, never mounted to a component).
    Agents run as replicas get slots (:func:`bound_users`; ``credentials/<name>.slots``).
    """
    try:
        users = rules_by_user(identities)
    except ValueError as exc:
        raise ConfigError(f"{exc} (every component needs a broker user of its own)") from None
    directory.mkdir(parents=True, exist_ok=True)
    old_file = directory / _OLD_PASSWORD_FILE
    known = read_passwords(old_file) if old_file.is_file() else {}
    known.update(read_credentials(directory / CREDENTIALS_DIR))
    passwords = {name: known.get(name) or new_password() for name in users}
    credentials = write_credentials(directory / CREDENTIALS_DIR, passwords)
    old_file.unlink(missing_ok=True)
    dynsec = directory / DYNSEC_FILE
    admin_password = None
    if admin:
        admin_password = new_password()
        write_private_file(directory / ADMIN_FILE, f"{ADMIN_USER}:{admin_password}\n")
    bound = bound_users(identities, passwords)  # each user: one client id only
    write_slots(credentials, slot_counts(bound))
    config = dynsec_config(users, passwords, admin_password=admin_password, bound=bound)
    write_private_file(dynsec, json.dumps(config, indent=2) + "\n")
    certificates = ensure_certificates(directory, tls_hosts) if tls_hosts else None
    files = BrokerFiles(dynsec, credentials, directory / CONF_FILE, certificates, plugin or find_dynsec_plugin())
    files.conf.write_text(_config_lines(files, broker_path or str(directory.resolve())))
    return files


def _config_lines(files: BrokerFiles, seen_at: str) -> str:
    lines = [
        "# Generated by mesh broker-config: a broker user per mesh component and least-privilege rules,",
        "# enforced by Mosquitto's dynamic-security plugin. Append after the listener lines of mosquitto.conf.",
        "allow_anonymous false",
        f"plugin {files.plugin}",
        f"plugin_opt_config_file {seen_at}/{DYNSEC_FILE}",
    ]
    if files.certificates is not None:
        lines += [f"certfile {seen_at}/server.crt", f"keyfile {seen_at}/server.key"]
    return "\n".join(lines) + "\n"


def find_dynsec_plugin() -> str:
    """Where this machine's Mosquitto keeps its dynamic-security plugin."""
    for pattern in _PLUGIN_DIRS:
        for candidate in sorted(Path("/").glob(f"{pattern.lstrip('/')}/{_PLUGIN}")):
            return str(candidate)
    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    raise ConfigError(
        f"Mosquitto's dynamic-security plugin ({_PLUGIN}) was not found next to {mosquitto}; install mosquitto 2.0 "
        "or newer (Debian/Ubuntu ship the plugin in the mosquitto package), or pass --plugin PATH"
    )


def local_broker_config(files: BrokerFiles) -> tuple[str, Path | None]:
    """The config lines of ``files`` for a Mosquitto this process starts, and a directory to delete after it.

    Started by root, Mosquitto reads the rules and its key only after dropping to user
    'mosquitto', which cannot reach 0600 files in root's state directory: they then go, owned by
    that user, to a directory of their own.
    """
    text = files.conf.read_text()
    if os.geteuid() != 0:
        return text, None
    try:
        broker_user = pwd.getpwnam("mosquitto")
    except KeyError:
        return text, None  # no such user: Mosquitto stays root and reads the files where they are
    directory = Path(tempfile.mkdtemp(prefix="mesh-broker-files-"))
    directory.chmod(0o711)  # the broker's user may reach the files, not list the directory
    originals = [files.dynsec]
    if files.certificates is not None:
        originals += [files.certificates.server_cert, files.certificates.server_key]
    for original in originals:
        copy = directory / original.name
        shutil.copyfile(original, copy)
        os.chown(copy, broker_user.pw_uid, broker_user.pw_gid)
    return _config_lines(files, str(directory)), directory
