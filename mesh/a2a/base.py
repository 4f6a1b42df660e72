"""The base class of every A2A wire model.

Python attributes are snake_case; the wire is camelCase. Input is accepted in either spelling
(SAM's examples use ``context_id`` / ``mime_type``), output is always camelCase.

Unknown keys are kept (``extra="allow"``) and written back on dump: a mesh relays messages
between peers that may speak a newer A2A revision or carry vendor fields, and must not
silently drop what it does not understand.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


def to_wire_name(name: str) -> str:
    """Map a Python attribute name to its wire (camelCase) name; ``in_`` -> ``in``."""
    # A trailing underscore only dodges a Python keyword; it is not part of the wire name.
    return to_camel(name.rstrip("_"))


class A2AModel(BaseModel):
    """Base of all A2A models: camelCase wire names, snake_case attributes, unknown keys kept."""

    model_config = ConfigDict(
        alias_generator=to_wire_name,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="allow",
    )

    def to_wire_dict(self) -> dict[str, Any]:
        """The JSON-ready dict sent on the wire (camelCase, ``None`` members left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_json_bytes(self) -> bytes:
        """The UTF-8 JSON payload sent on the wire (camelCase, ``None`` members left out)."""
        # Same output as model_dump_json(...).encode(), without the str round trip.
        return self.__pydantic_serializer__.to_json(self, by_alias=True, exclude_none=True)
