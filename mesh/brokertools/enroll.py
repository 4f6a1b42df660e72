"""Adding components to the secured broker of a running ``mesh up`` (``mesh run`` beside it).

``mesh up`` starts its broker under generated rules with an admin user whose password only its
state dir holds (:mod:`mesh.brokertools.dynsec`). A ``mesh run`` of the same user on the same
machine, finding that ``mesh up`` in the state file, gives each of its components a user of its
own with the rules of its kind (:func:`mesh.brokertools.brokerrules.rules_for`) through the
plugin's control topic, writes each one's credentials file (0600) beside the others, and a
signing key, then connects as them. Each new user is bound to its client id, with the other
users of its component (:func:`mesh.brokertools.brokerrules.bound_users`; replicas get slots,
as under ``mesh up``). Clients (the CLI user) get the rules of the new namespace too. Someone
without the admin password (another user, a container) is refused by the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import BoundUser, Identity, bound_users, rules_for, slot_counts
from mesh.brokertools.dynsec import ADMIN_USER, CONTROL_TOPIC, RESPONSE_TOPIC, role_acls, role_name
from mesh.clientids import SLOTS_SUFFIX, write_slots
from mesh.config.credentials import new_password, read_credentials, read_passwords, write_credentials
from mesh.errors import ConfigError, ConnectError
from mesh.transport import InboundMessage, MqttTransport

__all__ = ["enroll", "withdraw"]

log = logging.getLogger(__name__)

_TIMEOUT_S = 10.0


async def enroll(
    settings: BrokerSettings,
    admin_file: Path,
    credentials: Path,
    identities: Sequence[Identity],
    *,
    by: str = "mesh run",
) -> list[str]:
    """Give the ``identities`` without credentials in ``credentials`` a broker user; their names.

    Clients already known get the rules of the identities' namespaces added to their role.
    ``by``: the command, for the broker's ``textName`` of the users.
    """
    async with _locked(credentials):
        known = read_credentials(credentials)
        new = [identity for identity in identities if identity.kind != "client" and identity.name not in known]
        clients = [identity for identity in identities if identity.kind == "client" and identity.name in known]
        if not new and not clients:
            return []
        passwords = {identity.name: new_password() for identity in new}
        bound = bound_users(new, passwords)  # each user: its own client id only (brokerrules)
        commands = _creation(new, clients, bound, passwords, by)
        admin = _admin(settings, admin_file)
        write_credentials(credentials, {**known, **passwords})  # before the broker knows them: nothing connects yet
        write_slots(credentials, {**_slots_of(credentials), **slot_counts(bound)})
        await _run_commands(admin, commands)
    if new:
        log.info("added broker users for %s", ", ".join(f"{i.kind} {i.name}" for i in new))
    return [identity.name for identity in new]


def _creation(
    new: Sequence[Identity],
    clients: Sequence[Identity],
    bound: Mapping[str, BoundUser],
    passwords: Mapping[str, str],
    by: str,
) -> list[dict[str, object]]:
    """The plugin's commands that add the users and roles of ``new`` and give ``clients`` their namespaces."""
    commands: list[dict[str, object]] = []
    for identity in new:
        role = f"{identity.kind}-{identity.name}"
        commands.append({"command": "createRole", "rolename": role, "acls": role_acls(rules_for(identity))})
    for username, user in bound.items():  # each component's own user, then its other ones
        owner = next(identity for identity in new if identity.name == user.owner)
        what = f" ({user.role})" if user.role else ""
        role = f"{owner.kind}-{owner.name}"
        if user.rules is not None:  # a role with rights of its own (a gateway's watcher)
            role = role_name(user, username)
            commands.append({"command": "createRole", "rolename": role, "acls": role_acls(user.rules)})
        commands.append(
            {
                "command": "createClient",
                "username": username,
                "password": passwords[user.owner],
                "textName": f"mesh {owner.kind} {owner.name}{what} ({by})",
                "roles": [{"rolename": role}],
                "clientid": user.client_id,
            }
        )
    for identity in new:
        if identity.name not in bound:  # unbound (a name in several namespaces)
            commands.append(
                {
                    "command": "createClient",
                    "username": identity.name,
                    "password": passwords[identity.name],
                    "textName": f"mesh {identity.kind} {identity.name} ({by})",
                    "roles": [{"rolename": f"{identity.kind}-{identity.name}"}],
                }
            )
    for client in clients:  # the CLI user may talk to the new namespace
        role = f"client-{client.name}"
        commands += [{"command": "addRoleACL", "rolename": role, **acl} for acl in role_acls(rules_for(client))]
    return commands


@contextlib.asynccontextmanager
async def _locked(credentials: Path) -> AsyncIterator[None]:
    """Hold the credentials directory's lock: two commands adding or removing users at once (editors
    start several ``mesh mcp``) would otherwise each rewrite the files without the other's."""
    lock = os.open(credentials.with_name(credentials.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)  # drops the lock


async def withdraw(
    settings: BrokerSettings, admin_file: Path, credentials: Path, identities: Sequence[Identity]
) -> None:
    """Remove the broker users of ``identities`` (a short-lived component ending: ``mesh mcp``,
    ``mesh acp``) with their roles, credentials files and slot counts. Best effort on the broker: a
    user already gone is no error."""
    async with _locked(credentials):
        known = read_credentials(credentials)
        leaving = [identity for identity in identities if identity.name in known]
        if not leaving:
            return
        bound = bound_users(leaving, known)
        commands: list[dict[str, object]] = [{"command": "deleteClient", "username": name} for name in bound]
        commands += [{"command": "deleteClient", "username": i.name} for i in leaving if i.name not in bound]
        commands += [{"command": "deleteRole", "rolename": f"{i.kind}-{i.name}"} for i in leaving]
        commands += [
            {"command": "deleteRole", "rolename": role_name(user, name)} for name, user in bound.items() if user.rules
        ]
        names = {identity.name for identity in leaving}
        write_credentials(credentials, {name: password for name, password in known.items() if name not in names})
        write_slots(credentials, {name: count for name, count in _slots_of(credentials).items() if name not in names})
        await _run_commands(_admin(settings, admin_file), commands, missing_ok=True)
    log.info("removed the broker users of %s", ", ".join(f"{i.kind} {i.name}" for i in leaving))


def _admin(settings: BrokerSettings, admin_file: Path) -> BrokerSettings:
    """The broker's admin user (its password from ``admin_file``, which only mesh up's state dir holds)."""
    password = read_passwords(admin_file).get(ADMIN_USER)
    if password is None:
        raise ConfigError(f"{admin_file} holds no {ADMIN_USER} password; restart mesh up")
    return BrokerSettings(
        host=settings.host, port=settings.port, tls=settings.tls, username=ADMIN_USER, password=password
    )


async def _run_commands(admin: BrokerSettings, commands: list[dict[str, object]], *, missing_ok: bool = False) -> None:
    answers: asyncio.Queue[bytes] = asyncio.Queue()
    client_id = f"{ADMIN_USER}-{uuid.uuid4().hex[:12]}"
    try:
        async with MqttTransport(admin, client_id=client_id) as transport:

            def received(message: InboundMessage) -> None:
                answers.put_nowait(message.payload)

            await transport.subscribe(RESPONSE_TOPIC, received)
            await transport.publish(CONTROL_TOPIC, json.dumps({"commands": commands}).encode())
            async with asyncio.timeout(_TIMEOUT_S):
                reply = json.loads(await answers.get())
    except TimeoutError:
        raise ConnectError(f"the broker did not answer {CONTROL_TOPIC} within {_TIMEOUT_S:g} s") from None
    failed = [r for r in reply.get("responses", []) if isinstance(r, dict) and r.get("error")]
    # "Role already exists"/"Client already exists": a previous run added them; their
    # passwords were rewritten above, so set them again.
    problems = [r for r in failed if "already exists" not in str(r.get("error"))]
    if missing_ok:  # removing what is already gone
        problems = [r for r in problems if "not found" not in str(r.get("error")).lower()]
    if problems:
        raise ConnectError(f"the broker's dynamic-security plugin refused the changes to its users: {problems}")
    existed = any(r.get("command") == "createClient" and "already exists" in str(r.get("error")) for r in failed)
    again: list[dict[str, object]] = []
    for c in commands:
        if c["command"] == "createClient" and existed:
            again.append({"command": "setClientPassword", "username": c["username"], "password": c["password"]})
            if "clientid" in c:  # the bound id is keyed by the new password
                again.append({"command": "setClientId", "username": c["username"], "clientid": c["clientid"]})
    if again:
        await _run_commands(admin, again)


def _slots_of(credentials: Path) -> dict[str, int]:
    """The slot counts already in ``credentials`` (mesh up's: the CLI user's)."""
    files = credentials.glob("*" + SLOTS_SUFFIX)
    return {path.name.removesuffix(SLOTS_SUFFIX): int(path.read_text()) for path in files}
