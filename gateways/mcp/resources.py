"""Artifacts as MCP resources: the ``artifact://`` links a tool result carries, readable here.

A tool result holds a file an agent stored as a ``resource_link`` whose URI is the seed's
``artifact://{context_id}/{name}?version=N``. The MCP spec calls such a link "a resource that
the server is capable of reading", so a client (Claude Desktop, an IDE) fetches it with
``resources/read`` on this same connection: no HTTP gateway, no second credential. This module
serves that:

- ``resources/read``: the artifact's bytes from the namespace's store (text for ``text/*`` and
  JSON that is UTF-8, else a base64 blob), at most :data:`MAX_RESOURCE_BYTES`;
- ``resources/list``: the links this gateway handed to the caller, newest first.

A caller reads only links that were handed to it (the same principal: the launching user on
stdio, the authenticated one over HTTP); any other URI is "not found", exactly as one that
does not exist.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mesh.artifacts import ArtifactError, ArtifactNotFound, ArtifactRef, ArtifactStore, InvalidArtifactUri
from mesh.artifacts.uris import is_artifact_uri

__all__ = ["MAX_RESOURCE_BYTES", "ArtifactResources"]

#: One resources/read answer is one JSON message (base64 for binary): bounded.
MAX_RESOURCE_BYTES = 32 << 20
#: Links remembered per process (oldest forgotten first): what resources/list shows and read allows.
MAX_OFFERED = 4096
RESOURCE_NOT_FOUND = -32002  # the MCP spec's code for an unknown resource
_TEXT_TYPES = ("application/json", "application/xml", "application/yaml", "application/x-yaml")


class ArtifactResources:
    """The artifact links of this gateway's tool results, and reading them (module docstring)."""

    def __init__(self, store: ArtifactStore, *, max_bytes: int = MAX_RESOURCE_BYTES) -> None:
        self.store = store
        self.max_bytes = max_bytes
        # (principal, uri) -> the link as handed out
        self._offered: OrderedDict[tuple[str | None, str], types.ResourceLink] = OrderedDict()

    def offered(self, principal: str | None, result: types.CallToolResult) -> types.CallToolResult:
        """Note the artifact links of a tool result for ``principal``; the result, unchanged."""
        for block in result.content:
            if isinstance(block, types.ResourceLink) and is_artifact_uri(block.uri):
                key = (principal, block.uri)
                self._offered[key] = block
                self._offered.move_to_end(key)
                while len(self._offered) > MAX_OFFERED:
                    self._offered.popitem(last=False)
        return result

    async def list(self, principal: str | None) -> types.ListResourcesResult:
        links = [link for (who, _uri), link in reversed(self._offered.items()) if who == principal]
        return types.ListResourcesResult(resources=[types.Resource.model_validate(_fields(link)) for link in links])

    async def read(self, principal: str | None, uri: str) -> types.ReadResourceResult:
        if (principal, uri) not in self._offered:
            raise _not_found(uri)
        try:
            ref = ArtifactRef.parse(uri)
            info = await self.store.info(ref)
        except (ArtifactNotFound, InvalidArtifactUri):
            raise _not_found(uri) from None
        except ArtifactError as exc:
            raise MCPError(types.INTERNAL_ERROR, f"the artifact store is unavailable: {exc}") from None
        if info.size > self.max_bytes:
            raise MCPError(
                types.INVALID_PARAMS,
                f"{uri} is {info.size} bytes, over the {self.max_bytes} that resources/read returns in one "
                "message; fetch it with `mesh send ... --save-artifacts DIR` or the HTTP gateway's download link",
            )
        try:
            data = b"".join([chunk async for chunk in self.store.open(info)])
        except ArtifactNotFound:
            raise _not_found(uri) from None
        except ArtifactError as exc:
            raise MCPError(types.INTERNAL_ERROR, f"the artifact store is unavailable: {exc}") from None
        mime = info.mime_type
        contents: types.TextResourceContents | types.BlobResourceContents
        if mime.startswith("text/") or mime in _TEXT_TYPES:
            try:
                contents = types.TextResourceContents(uri=uri, mime_type=mime, text=data.decode())
                return types.ReadResourceResult(contents=[contents])
            except UnicodeDecodeError:
                pass  # not the text it claims: sent as bytes
        contents = types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode())
        return types.ReadResourceResult(contents=[contents])

    async def close(self) -> None:
        await self.store.close()


def _fields(link: types.ResourceLink) -> dict[str, Any]:
    return link.model_dump(exclude={"type"}, by_alias=True, exclude_none=True)


def _not_found(uri: str) -> MCPError:
    return MCPError(RESOURCE_NOT_FOUND, f"resource not found: {uri[:300]} (read only the links a tool result gave)")
