"""The mesh core: connect to an MQTT v5 broker and talk A2A to the agents on it.

::

    from mesh import MeshClient

    async with MeshClient.connect("mqtt://localhost:1883", "acme") as client:
        task = await client.send("echo", "hello")

The A2A models live in :mod:`mesh.a2a`, the transport seam in :mod:`mesh.transport`. Every
error the package raises on purpose is a :class:`MeshError` (the tree is drawn in
:mod:`mesh.errors`). :class:`MeshClient` and :class:`MessageLimits` load on first use, so
``import mesh`` and its small helper modules stay cheap (no pydantic, no paho).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mesh.broker import BrokerSettings, TlsOptions
from mesh.errors import (
    AgentNameTakenError,
    AgentNotFoundError,
    AgentUnavailableError,
    ConfigError,
    ConnectError,
    IllegalTransitionError,
    MeshError,
    NoSubscribersError,
    NotAuthorizedError,
    NotConnectedError,
    PacketTooLargeError,
    ProtocolError,
    PublishError,
    PublishTimeoutError,
    QuotaExceededError,
    RequestTimeoutError,
    SubscribeError,
    TransportError,
)
from mesh.lazy import alias_moved_modules, lazy_exports
from mesh.version import __version__

if TYPE_CHECKING:
    from mesh.client import MeshClient
    from mesh.limits import MessageLimits

__all__ = [
    "AgentNameTakenError",
    "AgentNotFoundError",
    "AgentUnavailableError",
    "BrokerSettings",
    "ConfigError",
    "ConnectError",
    "IllegalTransitionError",
    "MeshClient",
    "MeshError",
    "MessageLimits",
    "NoSubscribersError",
    "NotAuthorizedError",
    "NotConnectedError",
    "PacketTooLargeError",
    "ProtocolError",
    "PublishError",
    "PublishTimeoutError",
    "QuotaExceededError",
    "RequestTimeoutError",
    "SubscribeError",
    "TlsOptions",
    "TransportError",
    "__version__",
]

# Their modules import pydantic or paho: loaded when first asked for.
__getattr__, __dir__ = lazy_exports(__name__, {"MeshClient": "mesh.client", "MessageLimits": "mesh.limits"})

# Modules that moved into mesh.discovery, mesh.profile, mesh.config and mesh.cli (0.x): their old paths
# keep working, with a DeprecationWarning, until the next minor release.
alias_moved_modules(
    {
        "mesh.registry": "mesh.discovery.registry",
        "mesh.presence": "mesh.discovery.presence",
        "mesh.rollcall": "mesh.discovery.rollcall",
        "mesh.ownership": "mesh.discovery.ownership",
        "mesh.emqx": "mesh.profile.emqx",
        "mesh.emqx_requester": "mesh.profile.requester",
        "mesh.a2a_v1": "mesh.profile.v1",
        "mesh.a2a_v1_card": "mesh.profile.v1_card",
        "mesh.a2a_v1_requests": "mesh.profile.v1_requests",
        "mesh.a2a_v1_results": "mesh.profile.v1_results",
        "mesh.config_errors": "mesh.config.errors",
        "mesh.sections": "mesh.config.sections",
        "mesh.statedir": "mesh.config.statedir",
        "mesh.credentials": "mesh.config.credentials",
        "mesh.gctuning": "mesh.cli.gctuning",
    }
)
