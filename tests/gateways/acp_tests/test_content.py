"""ACP content blocks <-> A2A parts (both sides of the ACP bridge)."""

from __future__ import annotations

import base64

from mesh.e2a import E2AEnvelope, envelope_to_acp_jsonrpc_call
from mesh.e2a.acp_content import (
    a2a_part_to_acp_block,
    acp_block_to_a2a_part,
    acp_prompt_params,
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_blocks_become_parts() -> None:
    assert acp_block_to_a2a_part({"type": "text", "text": "hi"}) == {"kind": "text", "text": "hi"}
    assert acp_block_to_a2a_part({"type": "image", "data": "aGk=", "mimeType": "image/png"}) == {
        "kind": "file",
        "file": {"bytes": "aGk=", "mimeType": "image/png"},
    }
    link = {"type": "resource_link", "uri": "file:///a.py", "name": "a.py", "mimeType": "text/x-python"}
    assert acp_block_to_a2a_part(link) == {
        "kind": "file",
        "file": {"uri": "file:///a.py", "name": "a.py", "mimeType": "text/x-python"},
    }
    embedded = {"type": "resource", "resource": {"uri": "file:///n.md", "text": "# notes"}}
    assert acp_block_to_a2a_part(embedded) == {
        "kind": "file",
        "file": {"bytes": b64("# notes"), "name": "file:///n.md", "mimeType": "text/plain"},
    }
    assert acp_block_to_a2a_part({"type": "hologram"}) is None


def test_parts_become_blocks_and_text_files_round_trip() -> None:
    embedded = {"type": "resource", "resource": {"uri": "file:///n.md", "text": "# notes", "mimeType": "text/markdown"}}
    part = acp_block_to_a2a_part(embedded)
    assert part is not None and a2a_part_to_acp_block(part) == embedded
    assert a2a_part_to_acp_block({"kind": "data", "data": {"a": 1}}) == {"type": "text", "text": '{"a": 1}'}
    image = {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "image/png"}}
    assert a2a_part_to_acp_block(image)["type"] == "image"
    assert a2a_part_to_acp_block(image, images=False) == {
        "type": "resource",
        "resource": {"uri": "file:///attachment", "blob": "aGk=", "mimeType": "image/png"},
    }
    link = {"kind": "file", "file": {"uri": "https://x/y.pdf", "mimeType": "application/pdf"}}
    assert a2a_part_to_acp_block(link) == {
        "type": "resource_link",
        "uri": "https://x/y.pdf",
        "name": "https://x/y.pdf",
        "mimeType": "application/pdf",
    }


def test_the_seeds_prompt_call_becomes_real_acp_params() -> None:
    envelope = E2AEnvelope(
        request_id="r",
        method="session/prompt",
        session_id="s1",
        params={"content_blocks": [{"type": "text", "text": "x"}]},
    )
    call = envelope_to_acp_jsonrpc_call(envelope)
    assert call["params"]["session_id"] == "s1"  # E2A's snake_case
    assert acp_prompt_params(call["params"]) == {"sessionId": "s1", "prompt": [{"type": "text", "text": "x"}]}
