"""Conversions between E2A and the external protocols (spec section 8).

- ACP JSON-RPC request -> :class:`E2AEnvelope` (:func:`envelope_from_acp_jsonrpc`)
- A2A SendMessage -> :class:`E2AEnvelope` (:func:`envelope_from_a2a_send_message`)
- :class:`E2AEnvelope` -> ACP JSON-RPC call (:func:`envelope_to_acp_jsonrpc_call`)
- :class:`E2AResponse` -> one ACP JSON-RPC response or one A2A StreamResponse; ``None`` when the
  frame has no such projection.

E2A keeps ACP params in snake_case (``session_id``); real ACP peers want camelCase
(``sessionId``), so the ACP edge must convert the output of these functions before sending.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mesh.e2a.constants import (
    E2A_A2A_STREAM_BRANCHES,
    E2A_RESPONSE_KIND_A2A_STREAM_EVENT,
    E2A_RESPONSE_KIND_ACP_JSONRPC_ERROR,
    E2A_RESPONSE_KIND_ACP_PROMPT_RESULT,
    E2A_RESPONSE_KIND_E2A_ERROR,
    E2A_SOURCE_PROTOCOL_A2A,
    E2A_SOURCE_PROTOCOL_ACP,
)
from mesh.e2a.errors import E2AValidationError
from mesh.e2a.models import (
    E2AEnvelope,
    E2AProvenance,
    E2AResponse,
    IdentityOrigin,
)
from mesh.timestamps import utc_now_iso

# provenance.converter names this project's functions ("module:function").
_CONVERTER_ACP = f"{__name__}:envelope_from_acp_jsonrpc"
_CONVERTER_A2A = f"{__name__}:envelope_from_a2a_send_message"

_ACP_PROMPT_METHOD = "session/prompt"
_JSONRPC_INTERNAL_ERROR = -32603

# body.branch (snake_case) -> the A2A StreamResponse JSON key (camelCase).
_A2A_STREAM_KEYS: dict[str, str] = {
    "task": "task",
    "message": "message",
    "status_update": "statusUpdate",
    "artifact_update": "artifactUpdate",
}


def envelope_from_acp_jsonrpc(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    jsonrpc_id: str | int | None = None,
    session_id: str | None = None,
    channel: str | None = None,
    identity_origin: IdentityOrigin = IdentityOrigin.USER,
    converter: str | None = None,
    extra_provenance_details: Mapping[str, Any] | None = None,
) -> E2AEnvelope:
    """Build an envelope from an ACP JSON-RPC request; ``method`` stays the ACP method.

    ``session_id`` is the argument, else ``params["session_id"]`` when that is a string.
    The envelope has no ``request_id``: the gateway assigns one.
    """
    if params is not None and not isinstance(params, Mapping):
        raise E2AValidationError("ACP params", "a JSON object (by-name params) or None", params)
    p = dict(params or {})
    sid = session_id or p.get("session_id")
    details: dict[str, Any] = {"kind": "jsonrpc_request", "jsonrpc_method": method}
    if jsonrpc_id is not None:
        details["jsonrpc_id"] = jsonrpc_id
    details.update(extra_provenance_details or {})
    return E2AEnvelope(
        provenance=E2AProvenance(
            source_protocol=E2A_SOURCE_PROTOCOL_ACP,
            converter=converter or _CONVERTER_ACP,
            converted_at=utc_now_iso(),
            details=details,
        ),
        jsonrpc_id=jsonrpc_id,
        session_id=sid if isinstance(sid, str) else None,
        identity_origin=identity_origin,
        channel=channel,
        method=method,
        params=p,
    )


def envelope_from_a2a_send_message(
    *,
    task_id: str | None,
    context_id: str | None,
    message_body: Mapping[str, Any],
    metadata: Mapping[str, Any] | None = None,
    configuration: Mapping[str, Any] | None = None,
    channel: str | None = None,
    identity_origin: IdentityOrigin = IdentityOrigin.USER,
    converter: str | None = None,
    extra_provenance_details: Mapping[str, Any] | None = None,
) -> E2AEnvelope:
    """Build an envelope from A2A SendMessage; ``method`` becomes ``session/prompt``.

    ``metadata`` is the A2A request metadata and lands in ``a2a_metadata``, not in the
    gateway's ``channel_context``.
    """
    accepted = (configuration or {}).get("acceptedOutputModes")
    details: dict[str, Any] = {"kind": "a2a_send_message", "abstract_operation": "SendMessage"}
    details.update(extra_provenance_details or {})
    return E2AEnvelope(
        provenance=E2AProvenance(
            source_protocol=E2A_SOURCE_PROTOCOL_A2A,
            converter=converter or _CONVERTER_A2A,
            converted_at=utc_now_iso(),
            details=details,
        ),
        task_id=task_id,
        context_id=context_id,
        identity_origin=identity_origin,
        channel=channel,
        method=_ACP_PROMPT_METHOD,
        params={"message": message_body, "configuration": dict(configuration or {})},
        expected_output_modes=[str(m) for m in accepted] if isinstance(accepted, list) else [],
        a2a_metadata=dict(metadata or {}),
    )


def merge_params_to_acp_prompt(env: E2AEnvelope) -> dict[str, Any]:
    """A copy of ``env.params`` completed for ACP ``session/prompt``.

    For other methods the copy is returned as is. For ``session/prompt``: ``prompt`` comes from a
    non-empty ``content_blocks`` list, else from the first truthy of ``text`` / ``content`` /
    ``query`` (used only when it is a string) as one text block; then ``session_id`` is filled
    from the envelope when absent and ``acp_meta`` is merged into ``_meta``.

    Quirk kept from upstream (the prose spec says otherwise): when ``params`` already has
    ``prompt``, the copy is returned at once, so ``session_id`` and ``_meta`` are *not* added.
    """
    p = dict(env.params)
    if env.method != _ACP_PROMPT_METHOD or "prompt" in p:
        return p
    blocks = p.get("content_blocks")
    if isinstance(blocks, list) and blocks:
        p["prompt"] = list(blocks)
    else:
        text = p.get("text") or p.get("content") or p.get("query")
        if isinstance(text, str) and text:
            p["prompt"] = [{"type": "text", "text": text}]
    if env.session_id and "session_id" not in p:
        p["session_id"] = env.session_id
    if env.acp_meta:
        existing = p.get("_meta") or {}
        if not isinstance(existing, Mapping):
            raise E2AValidationError("E2AEnvelope.params._meta", "a JSON object", existing)
        # A new dict: updating the shallow-copied one would mutate env.params["_meta"].
        p["_meta"] = {**existing, **env.acp_meta}
    return p


def envelope_to_acp_jsonrpc_call(env: E2AEnvelope) -> dict[str, Any]:
    """The envelope as a JSON-RPC call ``{"jsonrpc", "id", "method", "params"}``.

    ``method`` is ``ext_method`` when ``method == "ext"``. Gateway RPC names such as ``chat.send``
    are not renamed: map them to an ACP method first or a pure ACP peer will refuse the call.
    """
    method = env.ext_method if env.method == "ext" and env.ext_method else env.method
    return {
        "jsonrpc": "2.0",
        "id": env.jsonrpc_id,
        "method": method,
        "params": merge_params_to_acp_prompt(env),
    }


def e2a_response_to_acp_jsonrpc_response(resp: E2AResponse) -> dict[str, Any] | None:
    """One JSON-RPC 2.0 response (``result`` or ``error``) for the frame, or ``None``.

    A complete ``projections["acp"]`` response wins; otherwise ``acp.prompt_result`` gives a
    result, ``acp.jsonrpc_error`` and ``e2a.error`` give an error. An ``e2a.error`` whose code is
    not an integer is sent as -32603 with the original code in ``data.e2a_code``.
    """
    projected = resp.projections.get("acp")
    if (
        isinstance(projected, Mapping)
        and projected.get("jsonrpc") == "2.0"
        and ("result" in projected or "error" in projected)
    ):
        out = dict(projected)
        out.setdefault("id", resp.jsonrpc_id)
        return out

    body = dict(resp.body)
    kind = resp.response_kind
    if kind == E2A_RESPONSE_KIND_ACP_PROMPT_RESULT:
        return {"jsonrpc": "2.0", "id": resp.jsonrpc_id, "result": body}
    if kind == E2A_RESPONSE_KIND_ACP_JSONRPC_ERROR:
        return {"jsonrpc": "2.0", "id": resp.jsonrpc_id, "error": body}
    if kind != E2A_RESPONSE_KIND_E2A_ERROR:
        return None

    raw_code = body.get("code")
    is_int_code = isinstance(raw_code, int) and not isinstance(raw_code, bool)
    data: dict[str, Any] = {}
    if body.get("details") is not None:
        data["details"] = body["details"]
    if body.get("external") is not None:
        data["external"] = body["external"]
    if raw_code is not None and not is_int_code:
        data["e2a_code"] = raw_code
    error: dict[str, Any] = {
        "code": raw_code if is_int_code else _JSONRPC_INTERNAL_ERROR,
        "message": str(body.get("message") or ""),
    }
    if data:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": resp.jsonrpc_id, "error": error}


def e2a_response_to_a2a_stream_payload(resp: E2AResponse) -> dict[str, Any] | None:
    """One A2A StreamResponse (``{"task"|"message"|"statusUpdate"|"artifactUpdate": {...}}``).

    Only ``a2a.stream_event`` frames apply. A single-key ``projections["a2a"]`` of that shape
    wins; otherwise ``body.branch`` (snake_case) picks the key and ``body.payload`` (a dict) is
    the value. ``None`` when the frame does not apply or its body is malformed.
    """
    if resp.response_kind != E2A_RESPONSE_KIND_A2A_STREAM_EVENT:
        return None
    projected = resp.projections.get("a2a")
    if isinstance(projected, Mapping) and len(projected) == 1 and next(iter(projected)) in _A2A_STREAM_KEYS.values():
        return dict(projected)
    branch = resp.body.get("branch")
    payload = resp.body.get("payload")
    if branch not in E2A_A2A_STREAM_BRANCHES or not isinstance(payload, Mapping):
        return None
    return {_A2A_STREAM_KEYS[branch]: dict(payload)}
