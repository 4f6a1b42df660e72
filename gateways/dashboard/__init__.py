"""The live dashboard: who is on the mesh and what they are doing, drawn in a browser.

- :mod:`gateways.dashboard.model`: the bounded picture (cards, recent tasks, rates);
- :mod:`gateways.dashboard.watcher`: what feeds it (the shared registry, requests, answers);
- :mod:`gateways.dashboard.service`: :class:`Dashboard`, which pages follow and send through;
- ``static/``: the page (HTML, CSS, JS modules; no build step, nothing from a CDN);
- :mod:`gateways.dashboard.command`: ``mesh dashboard``.

The web routes live with the web framework in :mod:`gateways.http.dashboard`: the HTTP gateway
serves them at ``/ui`` behind its authentication, ``mesh dashboard`` on a server of its own.
"""

from gateways.dashboard.model import Bounds, MeshView
from gateways.dashboard.service import Dashboard

__all__ = ["Bounds", "Dashboard", "MeshView"]
