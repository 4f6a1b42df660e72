"""The live dashboard: who is on the mesh and what they are doing, drawn in a browser.

- :mod:`gateways.dashboard.model`: the bounded picture (cards, recent tasks, rates), with its
  records (:mod:`~gateways.dashboard.records`) and the payload readers
  (:mod:`~gateways.dashboard.payloads`);
- :mod:`gateways.dashboard.watcher`: what feeds it (the shared registry, requests, answers);
- :mod:`gateways.dashboard.service`: :class:`Dashboard`, which pages follow and send through;
- ``static/``: the page (HTML, CSS, JS modules; no build step, nothing from a CDN);
- :mod:`gateways.dashboard.command`: ``mesh dashboard``.

The web routes live with the web framework in :mod:`gateways.http.dashboard`: the HTTP gateway
serves them at ``/ui`` behind its authentication, ``mesh dashboard`` on a server of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mesh.lazy import lazy_exports

if TYPE_CHECKING:
    from gateways.dashboard.model import Bounds, MeshView
    from gateways.dashboard.service import Dashboard

__all__ = ["Bounds", "Dashboard", "MeshView"]

# Loaded on first use: `mesh` imports gateways.dashboard.command to build its parser.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Bounds": "gateways.dashboard.model",
        "MeshView": "gateways.dashboard.model",
        "Dashboard": "gateways.dashboard.service",
    },
)
