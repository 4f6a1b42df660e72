"""Artifacts at the HTTP edge: uploads become URIs, URIs become downloads.

``GET /a2a/artifacts/{context_id}/{name}[?version=N]`` streams an artifact with ``Range``
support, ``Content-Type`` from its metadata and ``Content-Disposition: attachment``. A caller
gets it by the gateway's own authentication, or by the short-lived signed link the gateway put
in its answer in place of the ``artifact://`` URI (``...&user=..&expires=..&sig=..``; HMAC-SHA256
with a key of this process, valid ``artifacts.link_ttl_s``). Either way a user downloads only
what was saved for their own tasks (the artifact's owner user): anything else is 404, exactly
as for an artifact that does not exist.

Inbound, an HTTP client's inline FilePart above the threshold is stored (owned by the caller)
and replaced by its URI before the message enters the mesh.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateways.http.edge import Caller, RefusedCaller
from mesh.a2a import InvalidParams
from mesh.artifacts import (
    ArtifactError,
    ArtifactInfo,
    ArtifactNotFound,
    ArtifactRef,
    ArtifactSettings,
    ArtifactStore,
    InvalidArtifactName,
    InvalidArtifactUri,
    offload_inline_files,
    open_store,
    resolve_settings,
    rewrite_artifact_uris,
)
from mesh.e2a import E2AResponse

if TYPE_CHECKING:
    from gateways.http.server import HttpGateway

__all__ = ["ArtifactEdge", "artifact_routes"]

PATH = "/a2a/artifacts"
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


class ArtifactEdge:
    """One gateway's artifact store and signed links (see the module docstring)."""

    def __init__(self, artifacts: ArtifactSettings | ArtifactStore | None, namespace: str) -> None:
        if artifacts is None or isinstance(artifacts, ArtifactSettings):
            settings = resolve_settings(artifacts)
            self.store: ArtifactStore = open_store(settings, namespace)
            self.link_ttl_s = settings.link_ttl_s
        else:
            self.store = artifacts
            self.link_ttl_s = ArtifactSettings().link_ttl_s
        self.namespace = namespace
        self._key = secrets.token_bytes(32)

    # ---------------------------------------------------------------- links

    def _signature(self, ref: ArtifactRef, user: str, expires: int) -> str:
        text = "\n".join((self.namespace, ref.context_id, ref.name, str(ref.version or ""), user, str(expires)))
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def link(self, base_url: str, uri: str, user: str) -> str | None:
        """A signed download URL for ``user`` (``None`` for a URI that is no artifact of ours)."""
        try:
            ref = ArtifactRef.parse(uri)
        except InvalidArtifactUri:
            return None
        expires = int(time.time() + self.link_ttl_s)
        query: dict[str, Any] = {"version": ref.version} if ref.version is not None else {}
        query |= {"user": user, "expires": expires, "sig": self._signature(ref, user, expires)}
        return f"{base_url}{PATH}/{quote(ref.context_id)}/{quote(ref.name)}?{urlencode(query)}"

    def _linked_user(self, ref: ArtifactRef, query: Any) -> str | None:
        """The user a valid, unexpired signed link was made for, else ``None``."""
        user, expires, sig = query.get("user"), query.get("expires"), query.get("sig")
        if not (user and expires and sig and expires.isdigit()) or int(expires) < time.time():
            return None
        return str(user) if hmac.compare_digest(str(sig), self._signature(ref, user, int(expires))) else None

    # ---------------------------------------------------------------- inbound and outbound messages

    async def store_uploads(self, message: Any, user: str, task_id: str | None) -> None:
        """Inline files above the threshold in a wire message -> stored artifacts (by URI)."""
        if not isinstance(message, dict) or not _has_inline_file(message):
            return
        context_id = message.get("contextId")
        if not isinstance(context_id, str) or not context_id:
            context_id = message["contextId"] = uuid.uuid4().hex  # the task's context, chosen here
        try:
            await offload_inline_files(message, self.store, context_id=context_id, owner_user=user, owner_task=task_id)
        except ArtifactError as exc:
            raise InvalidParams(f"params.message: a file part could not be stored: {exc}") from exc

    def rewrite(self, frames: AsyncIterator[E2AResponse], base_url: str, user: str) -> AsyncIterator[E2AResponse]:
        """The frames with every ``artifact://`` URI as a signed download link for ``user``."""

        async def rewritten() -> AsyncIterator[E2AResponse]:
            try:
                async for frame in frames:
                    body = rewrite_artifact_uris(frame.body, lambda uri: self.link(base_url, uri, user))
                    yield frame if body is frame.body else dataclasses.replace(frame, body=body)
            finally:
                await frames.aclose()  # type: ignore[attr-defined]

        return rewritten()

    # ---------------------------------------------------------------- downloads

    async def download(self, request: Request) -> Response:
        try:
            version_text = request.query_params.get("version")
            version = int(version_text) if version_text and version_text.isdigit() else None
            ref = ArtifactRef(request.path_params["context_id"], request.path_params["name"], version)
        except (InvalidArtifactName, InvalidArtifactUri):
            return _not_found()
        user = self._linked_user(ref, request.query_params) if "sig" in request.query_params else None
        if user is None:
            caller = request.user
            if isinstance(caller, RefusedCaller):
                raise caller.refusal  # 401 with the challenge, as on every private route
            if not isinstance(caller, Caller):  # pragma: no cover - the app always authenticates
                return _not_found()
            user = caller.principal.name
        try:
            info = await self.store.info(ref)
        except ArtifactNotFound:
            return _not_found()
        except ArtifactError as exc:
            return JSONResponse({"error": f"the artifact store is unavailable: {exc}"}, status_code=503)
        if info.owner_user != user:
            return _not_found()  # someone else's: indistinguishable from none
        return _stream(self.store, info, request)


def _has_inline_file(message: dict[str, Any]) -> bool:
    parts = message.get("parts")
    return isinstance(parts, list) and any(isinstance(p, dict) and isinstance(p.get("file"), dict) for p in parts)


def _not_found() -> Response:
    return JSONResponse({"error": "artifact not found"}, status_code=404)


def _stream(store: ArtifactStore, info: ArtifactInfo, request: Request) -> Response:
    size = info.size
    start, end, status = 0, size, 200
    headers = {
        "Accept-Ranges": "bytes",
        "Content-Disposition": _disposition(info.name.rpartition("/")[2]),
        "ETag": f'"{info.sha256}"',
        "Cache-Control": "private, no-store",
        "X-Content-Type-Options": "nosniff",
    }
    wanted = request.headers.get("range")
    if wanted is not None and request.headers.get("if-range", headers["ETag"]) == headers["ETag"]:
        match = _RANGE.fullmatch(wanted.strip())
        if match is not None and (match[1] or match[2]):  # one range; several are served whole
            if match[1]:
                start = int(match[1])
                end = min(int(match[2]) + 1, size) if match[2] else size
            else:
                start = max(size - int(match[2]), 0)
            if start >= size or start >= end:
                return Response(status_code=416, headers={"Content-Range": f"bytes */{size}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    headers["Content-Length"] = str(end - start)
    if request.method == "HEAD":
        return Response(status_code=status, headers=headers, media_type=info.mime_type)
    return StreamingResponse(
        store.open(info, start, end), status_code=status, headers=headers, media_type=info.mime_type
    )


def _disposition(filename: str) -> str:
    ascii_name = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in filename)
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename)}"


def artifact_routes() -> list[Route]:
    """The download route; public, since a signed link stands in for credentials."""
    return [Route(PATH + "/{context_id}/{name:path}", _download, methods=["GET", "HEAD"])]


async def _download(request: Request) -> Response:
    gateway: HttpGateway = request.app.state.gateway
    return await gateway.artifacts.download(request)
