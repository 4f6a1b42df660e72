"""The broker's rules as a Mosquitto dynamic-security file (``mosquitto_dynamic_security.so``).

The plugin checks subscriptions as well as publishes (``acl_file`` grants every SUBSCRIBE and
only filters deliveries), so a denied subscription fails in its SUBACK and a denied publish in
its PUBACK (0x87), where the component sees it. Every access is denied by default; each user
gets one role holding the allow-rules of :func:`mesh.brokertools.brokerrules.rules_for`:

- ``subscribePattern`` for every filter it may read: a subscription is allowed when the filter,
  read as a topic, matches one of them (so ``.../echo/+`` allows ``.../echo/+`` and
  ``.../echo/t1``, never ``.../+/+``);
- ``publishClientReceive`` for the same filters, so nothing reaches a connection outside them;
- ``publishClientSend`` for the filters it may publish to (wills are checked the same way);
- a ``clientid``: the one client id the user may connect under (a component's own, see
  :func:`mesh.brokertools.brokerrules.bound_users`, and its other users ``{name}@{role}``,
  which share its password and its role; the EMQX profile's ``{org}/{unit}/{agent}``, see
  :func:`mesh.brokertools.brokerrules.profile_rules`). The plugin then refuses that user's
  CONNECT under any other id (CONNACK "not authorized"), so no connection with a component's
  credentials can take over another component's session.

With ``admin_password``, a user :data:`ADMIN_USER` may also run the plugin's commands
(``$CONTROL/dynamic-security/v1``): how ``mesh run`` next to ``mesh up`` adds its components'
users while the broker runs (:mod:`mesh.brokertools.enroll`). Only ``mesh up``'s state dir holds
its password.

Passwords are stored as the plugin stores them: PBKDF2-HMAC-SHA512, a 12-byte salt, base64.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Mapping
from typing import Any

from mesh.brokertools.brokerrules import BoundUser, Rules
from mesh.config.credentials import probe_client_id

__all__ = [
    "ADMIN_USER",
    "CONTROL_TOPIC",
    "RESPONSE_TOPIC",
    "dynsec_config",
    "hash_password",
    "probe_client_id",
    "role_acls",
    "role_name",
]

#: The broker user that may change the users and rules while the broker runs.
ADMIN_USER = "mesh-admin"
CONTROL_TOPIC = "$CONTROL/dynamic-security/v1"
RESPONSE_TOPIC = CONTROL_TOPIC + "/response"

# mosquitto_ctrl's own choice; the passwords are 256 random bits, so more rounds buy nothing.
_ITERATIONS = 101


def hash_password(password: str, *, salt: bytes | None = None) -> dict[str, Any]:
    """The ``password``, ``salt`` and ``iterations`` fields of a dynamic-security client."""
    salt = os.urandom(12) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, _ITERATIONS)
    return {
        "password": base64.b64encode(digest).decode(),
        "salt": base64.b64encode(salt).decode(),
        "iterations": _ITERATIONS,
    }


def role_acls(rules: Rules) -> list[dict[str, Any]]:
    """The plugin's ACL entries of one user's ``rules``."""
    acls = [_acl("subscribePattern", topic) for topic in rules.read]
    acls += [_acl("publishClientReceive", topic) for topic in rules.read if not topic.startswith("$share/")]
    acls += [_acl("publishClientSend", topic) for topic in rules.publish]
    return acls


def dynsec_config(
    users: Mapping[str, Rules],
    passwords: Mapping[str, str],
    *,
    admin_password: str | None = None,
    bound: Mapping[str, BoundUser] | None = None,
) -> dict[str, Any]:
    """The plugin's JSON document for ``users`` (rules by username) with their ``passwords``;
    ``bound``: the bound users, the components' own and their other users (each a client
    with its component's password and role)."""
    bound = bound or {}
    clients: list[dict[str, Any]] = []
    roles: list[dict[str, Any]] = []
    if admin_password is not None:
        control = "$CONTROL/dynamic-security/#"
        admin = {"username": ADMIN_USER, "textName": "mesh up", **hash_password(admin_password)}
        clients.append({**admin, "roles": [{"rolename": "admin"}]})
        kinds = ("publishClientSend", "publishClientReceive", "subscribePattern")
        roles.append({"rolename": "admin", "acls": [_acl(kind, control) for kind in kinds]})
    for name, rules in sorted(users.items()):
        role = f"{rules.kind}-{name}"
        client: dict[str, Any] = {
            "username": name,
            "textName": f"mesh {rules.kind} {name}",
            **hash_password(passwords[name]),
            "roles": [{"rolename": role}],
        }
        client_id = bound[name].client_id if name in bound else rules.client_id
        if client_id is not None:
            client["clientid"] = client_id
        clients.append(client)
        roles.append({"rolename": role, "acls": role_acls(rules)})
    for username, user in sorted(bound.items()):
        if username in users:
            continue  # a component's own user, above
        # Another connection of it: its password, an id of its own, its rights unless the role has its own.
        kind = users[user.owner].kind
        if user.rules is not None:
            roles.append({"rolename": role_name(user, username), "acls": role_acls(user.rules)})
        other = {
            "username": username,
            "textName": f"mesh {kind} {user.owner} ({user.role})",
            **hash_password(passwords[user.owner]),
            "roles": [{"rolename": role_name(user, username) if user.rules is not None else f"{kind}-{user.owner}"}],
            "clientid": user.client_id,
        }
        clients.append(other)
    return {
        "defaultACLAccess": {
            "publishClientSend": False,
            "publishClientReceive": False,
            "subscribe": False,
            "unsubscribe": True,
        },
        "clients": clients,
        "groups": [],
        "roles": roles,
    }


def role_name(user: BoundUser, username: str) -> str:
    """The broker role of a role user with rights of its own (a gateway's watcher: ``watch-http@watch``)."""
    return f"{user.role}-{username}"


def _acl(kind: str, topic: str) -> dict[str, Any]:
    return {"acltype": kind, "topic": topic, "priority": 0, "allow": True}
