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
import json
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import Identity, bound_users, rules_for, slot_counts
from mesh.brokertools.dynsec import ADMIN_USER, CONTROL_TOPIC, RESPONSE_TOPIC, role_acls
from mesh.clientids import SLOTS_SUFFIX, write_slots
from mesh.credentials import new_password, read_credentials, read_passwords, write_credentials
from mesh.errors import ConfigError, ConnectError
from mesh.transport import InboundMessage, MqttTransport

__all__ = ["enroll"]

log = logging.getLogger(__name__)

_TIMEOUT_S = 10.0


async def enroll(
    settings: BrokerSettings, admin_file: Path, credentials: Path, identities: Sequence[Identity]
) -> list[str]:
    """Give the ``identities`` without credentials in ``credentials`` a broker user; their names.

    Clients already known get the rules of the identities' namespaces added to their role.
    """
    known = read_credentials(credentials)
    new = [identity for identity in identities if identity.kind != "client" and identity.name not in known]
    clients = [identity for identity in identities if identity.kind == "client" and identity.name in known]
    if not new and not clients:
        return []
    commands: list[dict[str, object]] = []
    passwords: dict[str, str] = {}
    for identity in new:
        passwords[identity.name] = new_password()
    bound = bound_users(new, passwords)  # each user: its own client id only (brokerrules)
    for identity in new:
        role = f"{identity.kind}-{identity.name}"
        commands.append({"command": "createRole", "rolename": role, "acls": role_acls(rules_for(identity))})
    for username, user in bound.items():  # each component's own user, then its other ones
        owner = next(identity for identity in new if identity.name == user.owner)
        what = f" ({user.role})" if user.role else ""
        commands.append(
            {
                "command": "createClient",
                "username": username,
                "password": passwords[user.owner],
                "textName": f"mesh {owner.kind} {owner.name}{what} (mesh run)",
                "roles": [{"rolename": f"{owner.kind}-{owner.name}"}],
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
                    "textName": f"mesh {identity.kind} {identity.name} (mesh run)",
                    "roles": [{"rolename": f"{identity.kind}-{identity.name}"}],
                }
            )
    for client in clients:  # the CLI user may talk to the new namespace
        role = f"client-{client.name}"
        commands += [{"command": "addRoleACL", "rolename": role, **acl} for acl in role_acls(rules_for(client))]
    password = read_passwords(admin_file).get(ADMIN_USER)
    if password is None:
        raise ConfigError(f"{admin_file} holds no {ADMIN_USER} password; restart mesh up")
    admin = BrokerSettings(
        host=settings.host, port=settings.port, tls=settings.tls, username=ADMIN_USER, password=password
    )
    write_credentials(credentials, {**known, **passwords})  # before the broker knows them: nothing connects yet
    write_slots(credentials, {**_slots_of(credentials), **slot_counts(bound)})
    await _run_commands(admin, commands)
    if new:
        log.info("added broker users for %s", ", ".join(f"{i.kind} {i.name}" for i in new))
    return [identity.name for identity in new]


async def _run_commands(admin: BrokerSettings, commands: list[dict[str, object]]) -> None:
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
    if problems:
        raise ConnectError(f"the broker refused to add the component users: {problems}")
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
