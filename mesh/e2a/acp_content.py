"""ACP content blocks <-> A2A parts, on plain JSON (both sides of the ACP bridge use these).

ACP blocks are MCP's (``text``, ``image``, ``audio``, ``resource_link``, ``resource``); A2A
parts are ``text``, ``file`` (``bytes`` or ``uri``) and ``data``. Files keep their URI, name
and MIME type both ways; a text resource becomes a text file (its content base64-encoded) so
nothing of an embedded file is lost. Also here: the snake_case -> camelCase step that E2A's
ACP params need before they go to a real ACP peer.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "TEXT_MIME_PREFIXES",
    "a2a_part_to_acp_block",
    "a2a_parts_to_acp_blocks",
    "acp_block_to_a2a_part",
    "acp_blocks_to_a2a_parts",
    "acp_prompt_params",
    "is_text_mime",
]

TEXT_MIME_PREFIXES = ("text/", "application/json", "application/xml", "application/yaml", "application/x-yaml")


def is_text_mime(mime_type: str | None) -> bool:
    return mime_type is not None and mime_type.startswith(TEXT_MIME_PREFIXES)


def acp_block_to_a2a_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """One A2A part for an ACP content block; ``None`` for a block of no known type."""
    kind = block.get("type")
    if kind == "text":
        return {"kind": "text", "text": str(block.get("text", ""))}
    if kind in ("image", "audio"):
        return {"kind": "file", "file": _drop_none({"bytes": block.get("data", ""), "mimeType": block.get("mimeType")})}
    if kind == "resource_link":
        file = {"uri": block.get("uri", ""), "name": block.get("name"), "mimeType": block.get("mimeType")}
        return {"kind": "file", "file": _drop_none(file)}
    if kind == "resource":
        resource = block.get("resource")
        if not isinstance(resource, Mapping):
            return None
        uri, mime = resource.get("uri"), resource.get("mimeType")
        if isinstance(resource.get("text"), str):
            data = base64.b64encode(resource["text"].encode()).decode()
            mime = mime or "text/plain"
        else:
            data = str(resource.get("blob", ""))
        return {"kind": "file", "file": _drop_none({"bytes": data, "name": uri, "mimeType": mime})}
    return None


def acp_blocks_to_a2a_parts(blocks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [part for block in blocks if (part := acp_block_to_a2a_part(block)) is not None]


def a2a_part_to_acp_block(part: Mapping[str, Any], *, images: bool = True) -> dict[str, Any]:
    """One ACP content block for an A2A part.

    A file with a URI is a ``resource_link``; inline bytes are an ``image`` (when ``images``),
    else an embedded ``resource`` (text for a text MIME type, else a blob); data is JSON text.
    """
    kind = part.get("kind")
    if kind == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "data":
        return {"type": "text", "text": json.dumps(part.get("data"), ensure_ascii=False)}
    file = part.get("file")
    if not isinstance(file, Mapping):
        return {"type": "text", "text": ""}
    mime, name = file.get("mimeType"), file.get("name")
    if "uri" in file:
        uri = str(file["uri"])
        return _drop_none({"type": "resource_link", "uri": uri, "name": name or uri, "mimeType": mime})
    data = str(file.get("bytes", ""))
    if images and isinstance(mime, str) and mime.startswith("image/"):
        return {"type": "image", "data": data, "mimeType": mime}
    uri = name if isinstance(name, str) and ":" in name else f"file:///{name or 'attachment'}"
    if is_text_mime(mime):
        try:
            text = base64.b64decode(data, validate=True).decode()
        except (binascii.Error, ValueError):
            text = None
        if text is not None:
            return {"type": "resource", "resource": _drop_none({"uri": uri, "text": text, "mimeType": mime})}
    return {"type": "resource", "resource": _drop_none({"uri": uri, "blob": data, "mimeType": mime})}


def a2a_parts_to_acp_blocks(parts: Iterable[Mapping[str, Any]], *, images: bool = True) -> list[dict[str, Any]]:
    return [a2a_part_to_acp_block(part, images=images) for part in parts]


def acp_prompt_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The output of :func:`~mesh.e2a.merge_params_to_acp_prompt` as real ACP params.

    E2A keeps ``session_id`` in snake_case and ``content_blocks`` beside ``prompt``; an ACP
    peer wants ``{"sessionId", "prompt", "_meta"?}``.
    """
    out: dict[str, Any] = {"sessionId": params.get("sessionId", params.get("session_id")), "prompt": params["prompt"]}
    if params.get("_meta"):
        out["_meta"] = dict(params["_meta"])
    return out


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}
