"""The HTTP A2A gateway: A2A 0.3 and 1.0 JSON-RPC, and 1.0 HTTP+JSON (with SSE), for every agent
of a namespace.

:class:`HttpGateway` needs the ``http`` extra (starlette, uvicorn) and loads on first use, so the
``mesh.up`` entry point can read :data:`UP_CONFIG` without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mesh.lazy import lazy_exports

if TYPE_CHECKING:
    from gateways.http.server import HttpGateway
    from gateways.http.settings import HttpGatewaySettings

__all__ = ["UP_CONFIG", "HttpGateway", "HttpGatewaySettings"]

#: The config `mesh up` runs for it (the ``mesh.up`` entry point).
UP_CONFIG = Path(__file__).with_name("mesh-up.yaml")

__getattr__, __dir__ = lazy_exports(
    __name__, {"HttpGateway": "gateways.http.server", "HttpGatewaySettings": "gateways.http.settings"}
)
