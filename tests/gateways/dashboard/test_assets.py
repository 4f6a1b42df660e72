"""The dashboard's files are read once, when its routes are built: a request reads no file on
the event loop, and only the files it ships can be asked for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

import gateways.http.dashboard as dashboard_module
from gateways.http.dashboard import dashboard_routes


class _NoFiles:
    """Stands for the package's static folder once the routes are built: any read fails."""

    def __truediv__(self, name: str) -> Any:
        raise AssertionError(f"the dashboard read {name!r} while serving a request")

    def iterdir(self) -> Any:
        raise AssertionError("the dashboard listed its files while serving a request")


async def test_pages_and_assets_are_served_without_reading_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    app = Starlette(routes=dashboard_routes())
    app.state.dashboard = SimpleNamespace(namespace="acme/<ai>")
    monkeypatch.setattr(dashboard_module, "_ASSETS", _NoFiles())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        page = await http.get("/ui")
        assert page.status_code == 200 and "acme/&lt;ai&gt;" in page.text and "{{BASE}}" not in page.text
        script = await http.get("/ui/static/dashboard.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        for unknown in ("service.py", "..%2Fservice.py", ".hidden.js", "nothing.css"):
            assert (await http.get(f"/ui/static/{unknown}")).status_code == 404, unknown
