"""A workflow's input: the message as the ``input`` of the templates, checked against ``input_schema``.

A message with a DataPart gives its data. A text message gives ``{"text": <text>}``, or, when
the schema requires exactly one string property, ``{<that property>: <text>}``: a workflow
declared with ``required: [topic]`` is called with ``mesh send report "solar panels"``.

The check covers the part of JSON Schema an input needs: ``type``, ``properties``,
``required``, ``items``, ``enum`` and ``additionalProperties: false``; other keywords are
accepted and not checked.
"""

from __future__ import annotations

from typing import Any

from mesh.a2a import DataPart, Message, TextPart

__all__ = ["InputProblem", "check_schema", "message_input"]

_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


class InputProblem(ValueError):
    """The input does not match the workflow's ``input_schema``."""


def message_input(message: Message, schema: dict[str, Any] | None) -> Any:
    """The ``input`` a message gives (see the module docstring), checked against ``schema``."""
    data = next((p.data for p in message.parts if isinstance(p, DataPart)), None)
    if data is None:
        text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
        data = {_text_key(schema): text}
    if schema is not None:
        check_schema(data, schema, "input")
    return data


def _text_key(schema: dict[str, Any] | None) -> str:
    if schema is None:
        return "text"
    required = schema.get("required") or []
    properties = schema.get("properties") or {}
    strings = [k for k in required if isinstance(properties.get(k), dict) and properties[k].get("type") == "string"]
    return strings[0] if len(required) == 1 and strings else "text"


def check_schema(value: Any, schema: dict[str, Any], where: str) -> None:
    """Raise :class:`InputProblem` naming the first place ``value`` breaks ``schema``."""
    expected = schema.get("type")
    if isinstance(expected, str) and expected in _TYPES:
        kind = _TYPES[expected]
        wrong_bool = isinstance(value, bool) and expected in ("integer", "number")
        if not isinstance(value, kind) or wrong_bool:
            raise InputProblem(f"{where} should be of type {expected}, got {type(value).__name__}")
    if "enum" in schema and value not in schema["enum"]:
        raise InputProblem(f"{where} should be one of {schema['enum']}, got {value!r}")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key in schema.get("required") or ():
            if key not in value:
                raise InputProblem(f"{where} lacks the required property {key!r}")
        for key, item in value.items():
            if isinstance(properties.get(key), dict):
                check_schema(item, properties[key], f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                raise InputProblem(f"{where} has the property {key!r}, which the schema does not allow")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            check_schema(item, schema["items"], f"{where}[{index}]")
