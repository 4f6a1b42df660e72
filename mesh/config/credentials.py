"""Per-component broker passwords: a directory of one file per component, readable by its owner only.

``mesh broker-config`` (and ``mesh up``) generate a random password for every component of a
mesh config and write each to ``credentials/<name>`` (mode 0600, one ``name:password`` line),
so a deployment mounts to each component its own file and nothing else (DESIGN, "Secure by
default"); the broker gets only their hashes (see :mod:`mesh.brokertools.dynsec`). A component
finds its password under its own name, which is also its broker username:
:meth:`mesh.broker.BrokerSettings.for_identity`; ``<name>.slots`` beside it says how many client
ids a user with slots may use at once (:mod:`mesh.clientids`). A single file of
``name:password`` lines (the older layout) is still read.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from mesh.errors import ConfigError

__all__ = [
    "DEFAULT_CLIENT",
    "DOCTOR_USER",
    "PASSWORD_FILE_ENV",
    "PROBE_ROLE",
    "new_password",
    "password_for",
    "private_client_id",
    "probe_client_id",
    "read_credentials",
    "read_passwords",
    "role_client_id",
    "role_user",
    "write_credentials",
    "write_passwords",
    "write_private_file",
]

#: Where ``mesh run`` / ``mesh send`` find the password file when no option names one.
PASSWORD_FILE_ENV = "MESH_BROKER_PASSWORD_FILE"  # noqa: S105 - a variable's name
#: The broker user of ``mesh send`` and the other client commands when none is named.
DEFAULT_CLIENT = "cli"
#: Files of a credentials directory that are no one's password: files being written, signing keys
#: and the JWKS, slot counts, the token issuers of a secured mesh up (mesh.brokertools.localtrust), locks.
NOT_CREDENTIALS = (".tmp", ".jwk", ".json", ".slots", ".txt", ".lock")
#: The broker user of ``mesh doctor`` (a probe: its own scratch topics only).
DOCTOR_USER = "doctor"


def new_password() -> str:
    """256 random bits: guessing is hopeless, so the broker's cheap hash costs nothing."""
    return secrets.token_urlsafe(32)


def private_client_id(base: str, password: str | None) -> str:
    """``base`` with a suffix only the holder of ``password`` can compute (when there is one).

    A component's client id is fixed (its broker session, so what the broker redelivers to it
    after a restart, follows it); derived from its name alone, anyone with any credentials could
    connect under it and take its session over. Keyed by its password, the id stays the same
    across its restarts and is unknown to every other component.
    """
    if not password:
        return base
    digest = hmac.new(password.encode(), base.encode(), hashlib.sha256).hexdigest()[:16]
    return f"{base}-{digest}"


def role_user(name: str, role: str) -> str:
    """The broker user of one of a component's other connections, ``{name}@{role}`` (no mesh
    name has an ``@``; see mesh.clientids)."""
    return f"{name}@{role}"


def role_client_id(client_id: str, role: str) -> str:
    """The one client id of a role (or slot) user: the component's own, ``@{role}``."""
    return f"{client_id}@{role}"


#: The role of an agent's name check, whose user is ``{name}@probe`` (mesh.brokertools.brokerrules).
PROBE_ROLE = "probe"


def probe_client_id(client_id: str) -> str:
    """The client id of a bound agent's name check (its ``{name}@probe`` user)."""
    return role_client_id(client_id, PROBE_ROLE)


def read_passwords(path: str | os.PathLike[str]) -> dict[str, str]:
    """The file's ``name -> password``; a missing or malformed file is a :class:`ConfigError`."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"password file {source} not found; generate it with `mesh broker-config FILE.yaml --out DIR`"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read password file {source} ({exc.strerror}); check its owner and mode") from None
    passwords: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, colon, password = line.partition(":")
        if not colon or not name or not password:
            raise ConfigError(f"{source}: line {number} is not 'name:password'; regenerate the file")
        passwords[name] = password
    return passwords


def password_for(path: str | os.PathLike[str], name: str) -> str:
    """The password of broker user ``name`` from a credentials directory or a password file; its
    absence is a :class:`ConfigError` saying what to do."""
    if Path(path).is_dir():
        own = Path(path) / name
        if not own.is_file():
            raise ConfigError(
                f"no broker credentials for {name!r} in {path} (expected the file {own}); generate them with "
                f"`mesh broker-config` from the config that defines {name!r} (clients: --client {name})"
            )
        password = read_passwords(own).get(name)
    else:
        password = read_passwords(path).get(name)
    if password is None:
        raise ConfigError(
            f"password file {path} has no entry for {name!r}; regenerate it with `mesh broker-config` from the "
            f"config that defines {name!r} (clients: --client {name})"
        )
    return password


def write_passwords(path: str | os.PathLike[str], passwords: Mapping[str, str]) -> None:
    """Write the password file (mode 0600)."""
    lines = [f"{name}:{password}\n" for name, password in sorted(passwords.items())]
    header = "# Broker passwords of the mesh's components (name:password); generated by mesh broker-config.\n"
    write_private_file(path, header + "".join(lines))


def read_credentials(directory: str | os.PathLike[str]) -> dict[str, str]:
    """Every ``name -> password`` of a credentials directory (empty when it does not exist)."""
    found: dict[str, str] = {}
    folder = Path(directory)
    if not folder.is_dir():
        return found
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.endswith(NOT_CREDENTIALS):
            found.update(read_passwords(path))
    return found


def write_credentials(directory: str | os.PathLike[str], passwords: Mapping[str, str]) -> Path:
    """One 0600 file per component in ``directory`` (0700): what a deployment mounts to it alone.

    Files of components no longer named are removed with their passwords.
    """
    folder = Path(directory)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    for stale in set(read_credentials(folder)) - set(passwords):
        (folder / stale).unlink(missing_ok=True)
    header = "# This component's broker password (name:password); generated by mesh broker-config.\n"
    for name, password in sorted(passwords.items()):
        write_private_file(folder / name, f"{header}{name}:{password}\n")
    return folder


def write_private_file(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with ``text``, mode 0600 from its first byte (never readable by others, even briefly)."""
    target = Path(path)
    temporary = target.with_name(target.name + ".tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, target)
