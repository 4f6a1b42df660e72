"""Commands that join the secured ``mesh up`` of this machine as components of their own.

A command run beside ``mesh up`` (same user, same state dir) finds its broker, CA and
credentials through the state file (:mod:`mesh.brokertools.upstate`). One that is a component
(``mesh mcp`` and ``mesh acp`` are gateways) gets, like ``mesh run``'s agents, a broker user
of its own with the rights of its kind (:mod:`mesh.brokertools.enroll`), a signing key among
the trusted keys and, a gateway, a place among the token issuers
(:mod:`mesh.brokertools.localtrust`). A short-lived one (a random id: a new identity per run)
takes all of it away when it ends; a process killed before that leaves its user until ``mesh up``
stops, which removes the whole directory.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import Identity
from mesh.brokertools.enroll import enroll, withdraw
from mesh.brokertools.localtrust import add_components, remove_components, trust_settings
from mesh.brokertools.upstate import running_up_of_broker
from mesh.errors import MeshError

if TYPE_CHECKING:
    from mesh.trust import Trust

__all__ = ["Joined", "LocalUp", "joined", "local_up"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Joined:
    """A component's place on the secured ``mesh up``: its connection settings and its trust."""

    settings: BrokerSettings
    trust: Trust


@dataclass(frozen=True, slots=True)
class LocalUp:
    """Where the secured ``mesh up`` of a broker keeps what joining components need."""

    credentials: Path
    keys: Path
    admin_file: Path


def local_up(broker: BrokerSettings, namespace: str | None) -> LocalUp | None:
    """The secured ``mesh up`` of this machine whose broker and credentials ``broker`` uses, if any
    (None too where the environment names other credentials, or the record has no admin user)."""
    record = running_up_of_broker(broker.url, namespace)
    if record is None or not record.credentials or record.credentials != broker.password_file:
        return None
    if not record.admin_file or not record.keys:
        return None
    return LocalUp(Path(record.credentials), Path(record.keys), Path(record.admin_file))


@contextlib.asynccontextmanager
async def joined(broker: BrokerSettings, identity: Identity, *, keep: bool, by: str) -> AsyncIterator[Joined | None]:
    """``identity`` as a component of the secured ``mesh up`` whose broker ``broker`` is (None:
    no such ``mesh up`` here, ``broker`` is used as it is). Unless ``keep``, its user, key and
    issuer entry are removed on the way out."""
    up = local_up(broker, identity.namespace)
    if up is None:
        yield None
        return
    from mesh.trust import TrustSettings  # the JOSE library: only for a component under trust
    from mesh.trust.config import resolve

    credentials, keys, admin = up.credentials, up.keys, up.admin_file
    add_components(keys, [identity])  # its key first: registries trust its card as soon as it comes
    await enroll(broker, admin, credentials, [identity], by=by)
    trust = resolve(TrustSettings.model_validate(trust_settings(keys)), identity.name, keys)
    try:
        yield Joined(broker.for_identity(identity.name), trust)
    finally:
        if not keep:
            try:
                remove_components(keys, [identity])
                await withdraw(broker, admin, credentials, [identity])
            except (MeshError, OSError) as exc:  # mesh up stopped first: its broker and files are gone anyway
                log.debug("could not remove the broker user of %s %s: %s", identity.kind, identity.name, exc)
