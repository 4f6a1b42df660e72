"""Artifacts at the HTTP edge: uploads become URIs, URIs become downloads.

``GET /a2a/artifacts/{context_id}/{name}[?version=N]`` streams an artifact with ``Range``
support, ``Content-Type`` from its metadata and ``Content-Disposition: attachment``. A caller
gets it by the gateway's own authentication, or by the signed link the gateway put in its
answer in place of the ``artifact://`` URI (``...?version=N&user=..&expires=..&sig=..``;
HMAC-SHA256 with a key of this process).

A link is a **bearer capability**, for clients that cannot send credentials (an A2A client
given a FilePart URI, ``curl``, a browser's ``<a href>``): whoever holds it downloads with no
credentials. So it is narrow: one artifact, one version (an unversioned URI is pinned to the
latest version when the link is made), its owner's only, for ``artifacts.link_ttl_s`` (120 s
by default; ``Range`` requests work within it). A request to a link that carries credentials is
judged by them too: another user's (API key, token, password or browser session) is refused
(403), an invalid one gets the route's 401; the owner's own credentials work after expiry. An
expired link without them is refused (403) with a message to ask the gateway for a fresh one.

Either way a user downloads only what was saved for their own tasks (the artifact's owner
user): anything else is 404, exactly as for an artifact that does not exist.

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
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateways.http.auth import API_KEY_HEADER
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
        #: The clock links expire by (epoch seconds); tests move it.
        self.clock: Callable[[], float] = time.time
        self._key = secrets.token_bytes(32)

    # ---------------------------------------------------------------- links

    def _signature(self, ref: ArtifactRef, user: str, expires: int) -> str:
        text = "\n".join((self.namespace, ref.context_id, ref.name, str(ref.version), user, str(expires)))
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def link(self, base_url: str, uri: str, user: str) -> str | None:
        """A signed download URL of one version for ``user`` (``None`` for a URI that is no
        artifact of ours, or names no version: :meth:`rewrite` pins those first)."""
        try:
            ref = ArtifactRef.parse(uri)
        except InvalidArtifactUri:
            return None
        if ref.version is None:
            return None
        expires = int(self.clock() + self.link_ttl_s)
        query = {"version": ref.version, "user": user, "expires": expires, "sig": self._signature(ref, user, expires)}
        return f"{base_url}{PATH}/{quote(ref.context_id)}/{quote(ref.name)}?{urlencode(query)}"

    def _signed_link(self, ref: ArtifactRef, query: Any) -> _Link | None:
        """The user and expiry of a link this gateway signed for ``ref`` (expired or not), else ``None``."""
        user, expires, sig = query.get("user"), query.get("expires"), query.get("sig")
        if ref.version is None or not (user and expires and sig and expires.isdigit() and len(expires) < 16):
            return None
        if not hmac.compare_digest(str(sig), self._signature(ref, user, int(expires))):
            return None
        return _Link(str(user), int(expires))

    async def _links(self, body: Any, base_url: str, user: str) -> Any:
        """``body`` with every ``artifact://`` URI as a link for ``user``; an unversioned URI is
        pinned to the version that is the latest now, so its link never serves a later one."""
        unversioned: list[str] = []

        def versioned_link(uri: str) -> str | None:
            if (url := self.link(base_url, uri, user)) is None and _names_no_version(uri):
                unversioned.append(uri)
            return url

        body = rewrite_artifact_uris(body, versioned_link)
        if not unversioned:
            return body
        pinned: dict[str, str] = {}
        for uri in dict.fromkeys(unversioned):
            try:
                pinned[uri] = (await self.store.info(ArtifactRef.parse(uri))).uri
            except ArtifactError:  # none (or no store): no link, the URI stays as the agent sent it
                continue
        return rewrite_artifact_uris(
            body, lambda uri: self.link(base_url, pinned[uri], user) if uri in pinned else None
        )

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
                    body = await self._links(frame.body, base_url, user)
                    yield frame if body is frame.body else dataclasses.replace(frame, body=body)
            finally:
                await frames.aclose()  # type: ignore[attr-defined]

        return rewritten()

    # ---------------------------------------------------------------- downloads

    async def download(self, request: Request) -> Response:
        try:
            version_text = request.query_params.get("version")
            if version_text is not None and not (version_text.isdigit() and len(version_text) < 10):
                return _not_found()
            version = int(version_text) if version_text is not None else None
            ref = ArtifactRef(request.path_params["context_id"], request.path_params["name"], version)
        except (InvalidArtifactName, InvalidArtifactUri):
            return _not_found()
        caller = request.user
        if isinstance(caller, RefusedCaller) and _sends_credentials(request):
            raise caller.refusal  # a wrong credential is never ignored, link or not
        who = caller.principal.name if isinstance(caller, Caller) else None
        link = self._signed_link(ref, request.query_params) if "sig" in request.query_params else None
        if link is not None:
            if who is not None and who != link.user:
                return _refused(
                    "link_of_another_user",
                    "this download link was made for another user; ask the gateway for a link of your own "
                    "(the answer to your own request carries one)",
                )
            if who is None and link.expires < self.clock():
                expired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(link.expires))
                return _refused(
                    "link_expired",
                    f"this download link expired at {expired}; ask the gateway for a fresh link: get the task "
                    "again (tasks/get, or GET /tasks/{id}) and use the link in its answer, or send your credentials",
                )
            user = link.user
        elif isinstance(caller, RefusedCaller):
            raise caller.refusal  # 401 with the challenge, as on every private route
        elif who is None:  # pragma: no cover - the app always authenticates
            return _not_found()
        else:
            user = who
        try:
            info = await self.store.info(ref)
        except ArtifactNotFound:
            return _not_found()
        except ArtifactError as exc:
            return JSONResponse({"error": f"the artifact store is unavailable: {exc}"}, status_code=503)
        if info.owner_user != user:
            return _not_found()  # someone else's: indistinguishable from none
        return _stream(self.store, info, request)


@dataclasses.dataclass(frozen=True, slots=True)
class _Link:
    """What a valid signature vouches for: whose link it is and until when (epoch seconds)."""

    user: str
    expires: int


def _names_no_version(uri: str) -> bool:
    try:
        return ArtifactRef.parse(uri).version is None
    except InvalidArtifactUri:
        return False


def _sends_credentials(request: Request) -> bool:
    """Whether the request carries a credential header (a stale session cookie alone is none)."""
    return "authorization" in request.headers or API_KEY_HEADER in request.headers


def _refused(reason: str, message: str) -> Response:
    return JSONResponse({"error": message, "reason": reason}, status_code=403)


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
    """The download route; public, since a signed link is a bearer capability (module docstring)."""
    return [Route(PATH + "/{context_id}/{name:path}", _download, methods=["GET", "HEAD"])]


async def _download(request: Request) -> Response:
    gateway: HttpGateway = request.app.state.gateway
    return await gateway.artifacts.download(request)
