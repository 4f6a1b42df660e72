"""The message size limits agents and gateways share."""

from __future__ import annotations

from typing import Any

import pytest

from mesh.a2a import InvalidParams, Message
from mesh.limits import MessageLimits, check_message_limits


def text_message(*texts: str) -> dict[str, Any]:
    parts = [{"kind": "text", "text": text} for text in texts]
    return {"kind": "message", "role": "user", "messageId": "m1", "parts": parts}


def too_big(message: Any, **kwargs: Any) -> InvalidParams:
    with pytest.raises(InvalidParams) as info:
        check_message_limits(message, MessageLimits(), **kwargs)
    return info.value


def test_message_within_limits_passes() -> None:
    check_message_limits(text_message("x" * 100_000), MessageLimits())
    check_message_limits(text_message(*["hi"] * 100), MessageLimits())
    check_message_limits({"parts": "not a list"}, MessageLimits())  # left to validation
    check_message_limits({"parts": [None, 3, {"text": 5}]}, MessageLimits())


def test_too_many_parts() -> None:
    error = too_big(text_message(*["hi"] * 101))
    assert error.data["errors"] == [
        {"path": "params.message.parts", "reason": "101 parts exceeds 100", "type": "too_large"}
    ]
    assert "limits.max_parts" in error.error.message


def test_text_part_bytes_are_utf8_bytes() -> None:
    error = too_big(text_message("ok", "é" * 50_001))  # 100,002 bytes in 50,001 characters
    assert error.data["errors"][0]["path"] == "params.message.parts.1.text"
    assert "100002 bytes" in error.error.message and "max_text_part_bytes" in error.error.message


def test_data_part_size() -> None:
    message = {"parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"blob": "x" * 1_000_000}}]}
    error = too_big(message, path="params.request")
    assert error.data["errors"][0]["path"] == "params.request.parts.1.data"
    check_message_limits(message, MessageLimits(max_data_part_bytes=2_000_000))


def test_a2a_1_0_parts_without_kind() -> None:
    assert too_big({"parts": [{"text": "x" * 100_001}]}).data["errors"][0]["path"] == "params.message.parts.0.text"


def test_message_model_is_checked_too() -> None:
    message = Message.model_validate(text_message("a", "x" * 100_001))
    assert too_big(message).data["errors"][0]["path"] == "params.message.parts.1.text"
    small = Message.model_validate(
        {**text_message("a"), "parts": [{"kind": "data", "data": {"k": 1}}, {"kind": "file", "file": {"uri": "u"}}]}
    )
    check_message_limits(small, MessageLimits())


def test_a_models_extra_fields_are_checked_as_its_fields() -> None:
    """A text part may carry extra fields (A2A allows them): a ``data`` among them is bounded too."""
    message = Message.model_validate(
        {**text_message("a"), "parts": [{"kind": "text", "text": "hi", "data": {"blob": "x" * 1_000_000}}]}
    )
    assert too_big(message).data["errors"][0]["path"] == "params.message.parts.0.data"
