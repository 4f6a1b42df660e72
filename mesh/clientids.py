"""Which broker user and client id each connection uses (DESIGN, "Trust": client ids are bound to identities).

Mosquitto lets any authenticated user connect under a client id in use and takes the session
over; dynamic security's per-user ``clientid`` is the only refusal. So under the generated rules
(:mod:`mesh.brokertools.brokerrules`) every broker user may connect under one client id only,
derived from its password (:func:`mesh.config.credentials.private_client_id`): another component's
credentials can neither use it nor compute it. A component with several connections has a
broker user for each, sharing its password and its rights:

- **its own user** (its name), for its main connection: :func:`own_client_id`;
- **role users** ``{name}@{role}`` for its other connections, bound to ``<own id>@{role}``: an
  agent's name check (``@probe``), a gateway's dashboard watcher (``@watch``) and sender
  (``@ui``). A broker that does not know the role user (rules of an older version, another
  broker) refuses it (CONNACK 0x86/0x87): :func:`connect_as_role` then connects as the
  component's own user under another id, as before;
- **slots** for an identity that runs an unknown number of connections at once (the CLI user,
  an agent's replicas): slot 0 is its own user, slot ``k`` the user ``{name}@{k}`` bound to
  ``<own id>@{k}``. Each connection claims a free slot with an exclusive lock on a file of the
  state dir (:func:`claim_slot`), released when it closes or its process dies, so concurrent
  commands of one machine never share a client id. Replicas on several machines or containers
  cannot share lock files: each is given its slot by ``$MESH_REPLICA_SLOT``
  (:func:`replica_connection`; a StatefulSet pod index). The rules name
  how many slots a user has in ``<credentials>/<name>.slots``. Without that file (credentials in
  a URL, rules of an older version, another broker) a client takes its own client id while no
  other connection of the machine holds it, else a random one, and a replica its instance's id.
  Two machines with the same credentials and their own state dirs may pick the same slot (or two
  replicas be given the same): they take each other's session over (logged with the reason).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mesh.broker import BrokerSettings
from mesh.config.credentials import private_client_id, role_client_id, role_user, write_private_file
from mesh.config.statedir import default_state_dir
from mesh.errors import ConfigError, ConnectError
from mesh.transport import MqttTransport

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no slots, connections take random ids
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "CLIENT_SLOTS",
    "REFUSED_USER",
    "REPLICA_SLOT_ENV",
    "SLOTS",
    "SLOTS_SUFFIX",
    "Claimed",
    "claim_slot",
    "client_transport",
    "connect_as_role",
    "connection_for",
    "own_client_id",
    "replica_connection",
    "replica_slot",
    "role_client_id",
    "role_user",
    "slot_count",
    "slot_user",
    "write_slots",
]

log = logging.getLogger(__name__)

#: Connections at once of an agent run as replicas: its replicas.
SLOTS = 16
#: Connections at once of a client user: commands of one machine running together (a script
#: sending in parallel), each holding its slot for its connection's life.
CLIENT_SLOTS = 64
#: ``<credentials>/<name>.slots``: how many slots the rules give ``name``.
SLOTS_SUFFIX = ".slots"
#: The slot a process's replicas take, where replicas cannot share lock files (several machines or
#: containers): ``0`` ... ``<slots> - 1``, e.g. a StatefulSet pod index.
REPLICA_SLOT_ENV = "MESH_REPLICA_SLOT"
#: CONNACK reasons of a user the broker does not take: bad user name or password, not authorized,
#: and "server unavailable", which ejabberd answers for a user name with an '@'.
REFUSED_USER = frozenset({0x86, 0x87, 0x88})


def own_client_id(kind: str, namespace: str, name: str, password: str | None) -> str:
    """The one client id of a component's own user: ``{ns}/{name}-<hmac>`` (a client or a probe, in
    every namespace: ``{name}-<hmac>``)."""
    return private_client_id(name if kind in ("client", "probe") else f"{namespace}/{name}", password)


def slot_user(name: str, slot: int) -> str:
    """The broker user of slot ``slot`` of ``name`` (slot 0: ``name`` itself)."""
    return name if slot == 0 else role_user(name, str(slot))


def slot_count(settings: BrokerSettings) -> int:
    """How many slots the rules give the user of ``settings`` (0: none, its connections are unbound)."""
    if fcntl is None or not settings.password or not settings.username or settings.password_file is None:
        return 0
    marker = Path(settings.password_file) / f"{settings.username}{SLOTS_SUFFIX}"
    try:
        return max(0, int(marker.read_text().strip()))
    except (OSError, ValueError):
        return 0


def write_slots(directory: Path, slots: Mapping[str, int]) -> None:
    """Write the ``.slots`` file of each user with slots into the credentials ``directory``; remove the others."""
    for stale in directory.glob(f"*{SLOTS_SUFFIX}"):
        if stale.name.removesuffix(SLOTS_SUFFIX) not in slots:
            stale.unlink(missing_ok=True)
    for name, count in slots.items():
        write_private_file(directory / f"{name}{SLOTS_SUFFIX}", f"{count}\n")


@dataclass(slots=True)
class Claimed:
    """A connection's user and client id; with a slot, the lock that holds it until :meth:`release`."""

    settings: BrokerSettings
    client_id: str
    slot: int | None = None
    _lock: int | None = None

    def release(self) -> None:
        """Let another connection take the slot (idempotent)."""
        if self._lock is not None:
            lock, self._lock = self._lock, None
            os.close(lock)  # closing the descriptor drops the lock

    def transport(self, **options: Any) -> MqttTransport:
        """The connection (not yet connected); closing it (or losing it to the garbage collector)
        releases the slot."""
        if self._lock is None:
            return MqttTransport(self.settings, client_id=self.client_id, **options)
        transport = _SlotTransport(self, **options)
        weakref.finalize(transport, self.release)
        return transport


class _SlotTransport(MqttTransport):
    """A connection that holds a slot until it is closed."""

    def __init__(self, claimed: Claimed, **options: Any) -> None:
        super().__init__(claimed.settings, client_id=claimed.client_id, **options)
        self._claimed = claimed

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            self._claimed.release()


def _slot_lock(settings: BrokerSettings, own_id: str, slot: int) -> int | None:
    """Slot ``slot``'s lock of this machine, held (``None``: another connection holds it)."""
    directory = default_state_dir() / "slots"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    # By user and where its password is, not by URL (localhost and 127.0.0.1 are one broker): the
    # same lock files serve every run of a mesh up, whose credentials stay where they were.
    where = str(Path(settings.password_file).resolve()) if settings.password_file else own_id
    key = hashlib.sha256(f"{settings.username}\n{where}".encode()).hexdigest()[:16]
    lock = os.open(directory / f"{key}-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        return None
    return lock


def _in_slot(settings: BrokerSettings, username: str, own_id: str, slot: int, lock: int | None) -> Claimed:
    client_id = own_id if slot == 0 else role_client_id(own_id, str(slot))
    return Claimed(dataclasses.replace(settings, username=slot_user(username, slot)), client_id, slot, lock)


def claim_slot(
    settings: BrokerSettings, own_id: str, otherwise: str, *, count: int | None = None, spare: bool = False
) -> Claimed:
    """A free slot of the user of ``settings`` (whose own client id is ``own_id``) among its
    ``count`` (default: what the rules say, :func:`slot_count`); without slots, that user as it
    is under the client id ``otherwise``.

    When every slot is held by a live connection of this machine: :class:`ConnectError`, or with
    ``spare`` the user under ``otherwise``.
    """
    count = slot_count(settings) if count is None else count
    if count == 0 or settings.username is None or fcntl is None:
        return Claimed(settings, otherwise)
    for slot in range(count):
        lock = _slot_lock(settings, own_id, slot)
        if lock is not None:
            return _in_slot(settings, settings.username, own_id, slot, lock)
    if spare:
        return Claimed(settings, otherwise)
    raise ConnectError(
        f"all {count} connections broker user {settings.username!r} may open at once are in use on this machine; "
        "wait for one of its commands to end"
    )


def replica_slot(settings: BrokerSettings) -> int | None:
    """The slot ``$MESH_REPLICA_SLOT`` gives the replicas of the user of ``settings`` (``None``:
    unset, each claims a free one of this machine).

    :class:`ConfigError` naming the variable, its value and the slots the rules give the user
    when it is not one of them (no ``.slots`` file beside the credentials: none).
    """
    value = os.environ.get(REPLICA_SLOT_ENV, "").strip()
    if not value:
        return None
    count = slot_count(settings)
    try:
        slot = int(value)
    except ValueError:
        slot = -1
    if 0 <= slot < count:
        return slot
    user = settings.username or "?"
    if count == 0:
        raise ConfigError(
            f"{REPLICA_SLOT_ENV}={value!r}: the rules give broker user {user!r} no slots (no {user}{SLOTS_SUFFIX} "
            f"beside its credentials in {settings.password_file or 'a credentials directory'}); generate the rules "
            f"with `mesh broker-config` and give the replica {user}{SLOTS_SUFFIX} beside its password file, or unset "
            f"{REPLICA_SLOT_ENV}"
        )
    raise ConfigError(
        f"{REPLICA_SLOT_ENV}={value!r} is not a slot of broker user {user!r}: give an integer from 0 to {count - 1} "
        f"(its {count} slots, {user}{SLOTS_SUFFIX}), one per running replica"
    )


def replica_connection(settings: BrokerSettings, own_id: str, otherwise: str) -> Claimed:
    """The user and client id of a replica of the agent whose user is that of ``settings`` (its
    own client id ``own_id``): the slot ``$MESH_REPLICA_SLOT`` names (:func:`replica_slot`), else
    a free one of this machine (:func:`claim_slot`); without slots, the user under ``otherwise``.

    A named slot takes its lock too where it can, so replicas of one machine, named or not, never
    share one: held by another connection of this machine, :class:`ConnectError`. Where the state
    dir cannot be written (a read-only container) it goes without.
    """
    slot = replica_slot(settings)
    if slot is None or settings.username is None:
        return claim_slot(settings, own_id, otherwise)
    try:
        lock = _slot_lock(settings, own_id, slot)
    except OSError as exc:
        log.debug("no lock for slot %d of %s (%s): %s alone keeps it", slot, settings.username, exc, REPLICA_SLOT_ENV)
        return _in_slot(settings, settings.username, own_id, slot, None)
    if lock is None:
        raise ConnectError(
            f"slot {slot} of broker user {settings.username!r} ({REPLICA_SLOT_ENV}={slot}) is held by another "
            f"connection of this machine; give each replica a slot of its own"
        )
    return _in_slot(settings, settings.username, own_id, slot, lock)


def connection_for(settings: BrokerSettings, kind: str, namespace: str, name: str, otherwise: str) -> Claimed:
    """The user and client id of the one connection of component ``name`` (a gateway, a client;
    not a replica) with ``settings``.

    As its own user: its own client id (a client: a slot). As a user of another name (the CLI
    user running ``mesh acp``'s gateway): a slot of that client user. A client user whose slots
    are unknown (credentials in the URL, no ``.slots`` file beside them) takes its own client id
    when no other connection of this machine holds it (the one id rules that bind the user
    allow), else ``otherwise``, a random id (what other brokers and older rules take).
    """
    if not settings.password or not settings.username:
        return Claimed(settings, otherwise)
    if settings.username != name:
        kind = "client"
    own = own_client_id(kind, namespace, settings.username, settings.password)
    if slot_count(settings):
        return claim_slot(settings, own, otherwise)
    if kind == "client":
        return claim_slot(settings, own, otherwise, count=1, spare=True)
    return Claimed(settings, own)


def client_transport(settings: BrokerSettings, **options: Any) -> MqttTransport:
    """A client's connection (not yet connected): a slot of its user, else a random client id."""
    otherwise = f"{settings.username or 'mesh'}-{uuid.uuid4().hex[:12]}"
    return connection_for(settings, "client", "", settings.username or "", otherwise).transport(**options)


async def connect_as_role(
    settings: BrokerSettings, role: str, own_id: str, otherwise: str, **options: Any
) -> MqttTransport:
    """A connection as the role user ``{user}@{role}`` of ``settings`` under ``<own_id>@{role}``,
    connected; as the user itself under ``otherwise`` where the broker does not know the role user
    (or there are no credentials)."""
    if settings.username and settings.password:
        role_settings = dataclasses.replace(settings, username=role_user(settings.username, role))
        transport = MqttTransport(role_settings, client_id=role_client_id(own_id, role), **options)
        try:
            await transport.connect()
            return transport
        except ConnectError as exc:
            if exc.reason_code not in REFUSED_USER:
                raise
            log.debug("no %s user on the broker (%s); connecting as %s", role_settings.username, exc, settings.username)
    transport = MqttTransport(settings, client_id=otherwise, **options)
    await transport.connect()
    return transport
