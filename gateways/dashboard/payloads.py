"""Reading what crosses the broker, as the dashboard does: it only observes, so anything that
does not parse is shown as empty rather than refused.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from mesh.artifacts import ArtifactError, ArtifactRef, is_artifact_uri

__all__ = ["download_links", "json_object", "parts_text", "str_or_none", "timestamp_of"]


def json_object(payload: bytes) -> dict[str, Any]:
    """The payload as a JSON object; ``{}`` for anything else (the dashboard only observes)."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def parts_text(holder: dict[str, Any]) -> str:
    """The text of a message's or artifact's parts (data parts as compact JSON)."""
    parts = holder.get("parts")
    if not isinstance(parts, list):
        return ""
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif "data" in part:
            texts.append(json.dumps(part["data"], ensure_ascii=False)[:200])
    return " ".join(t.strip() for t in texts if t.strip())


_MAX_LINKS = 10


def download_links(holder: dict[str, Any]) -> list[dict[str, str]]:
    """The gateway's download path of each ``artifact://`` file part (at most ten): the page
    links them, and the gateway serves them to their owner (:mod:`gateways.http.artifacts`)."""
    parts = holder.get("parts")
    links: list[dict[str, str]] = []
    for part in parts if isinstance(parts, list) else []:
        file = part.get("file") if isinstance(part, dict) else None
        uri = file.get("uri") if isinstance(file, dict) else None
        if not isinstance(uri, str) or not is_artifact_uri(uri) or len(links) == _MAX_LINKS:
            continue
        try:
            ref = ArtifactRef.parse(uri)
        except ArtifactError:
            continue
        version = "" if ref.version is None else f"?version={ref.version}"
        links.append({"name": ref.name, "href": f"/a2a/artifacts/{quote(ref.context_id)}/{quote(ref.name)}{version}"})
    return links


def timestamp_of(value: object, default: float) -> float:
    """An A2A status timestamp (ISO 8601) as epoch seconds; ``default`` when there is none."""
    if not isinstance(value, str):
        return default
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return default
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
