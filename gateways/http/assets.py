"""The static files of a gateway page (the dashboard, the chat): read once, when its routes are
built, so that a request reads no file on the event loop and only the files a package ships can
be asked for."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.resources.abc import Traversable

from starlette.responses import JSONResponse, Response

__all__ = ["MEDIA_TYPES", "StaticAssets"]

MEDIA_TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
}


def _suffix(name: str) -> str:
    return name[name.rfind(".") :]


class StaticAssets:
    """The files of ``folder`` with one of ``suffixes`` (dot files left out), by name."""

    def __init__(self, folder: Traversable, *, what: str, suffixes: Iterable[str], pages: Iterable[str] = ()) -> None:
        """``what`` names them in a 404; files with a suffix in ``pages`` are read but not served
        as assets (their own routes serve them)."""
        wanted = frozenset(suffixes)
        self.what = what
        self._pages = frozenset(pages)
        self.files = {
            item.name: item.read_bytes()
            for item in folder.iterdir()
            if item.is_file() and not item.name.startswith(".") and _suffix(item.name) in wanted
        }

    def text(self, name: str) -> str:
        """A file's text ("" if the package has none by that name)."""
        return self.files.get(name, b"").decode("utf-8")

    def response(self, name: str) -> Response:
        """The file ``name`` as an asset, or a 404 naming it."""
        content = self.files.get(name)
        if content is None or _suffix(name) in self._pages:
            return JSONResponse({"error": f"no {self.what} asset {name!r}"}, status_code=404)
        return Response(content, media_type=MEDIA_TYPES[_suffix(name)], headers={"Cache-Control": "no-cache"})
