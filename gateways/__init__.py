"""Gateways bring the outside world onto the mesh.

Every inbound request is normalized to an E2A envelope (:mod:`mesh.e2a`) and sent to an
agent through the :class:`GatewayRuntime`; :class:`HttpGateway` serves A2A over HTTP (JSON-RPC
and SSE) and needs the ``http`` extra (``pip install 'mqtt-agent-mesh[http]'``). Everything but
``__version__`` loads on first use, so ``gateways`` imports without that extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mesh.lazy import lazy_exports
from mesh.version import __version__

if TYPE_CHECKING:
    from gateways.errors import GatewayError
    from gateways.http.server import HttpGateway
    from gateways.http.settings import HttpGatewaySettings
    from gateways.runtime import GatewayRuntime

__all__ = ["GatewayError", "GatewayRuntime", "HttpGateway", "HttpGatewaySettings", "__version__"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "GatewayError": "gateways.errors",
        "GatewayRuntime": "gateways.runtime",
        "HttpGateway": "gateways.http.server",
        "HttpGatewaySettings": "gateways.http.settings",
    },
)
