"""Typed reads from one JSON object, for the ``from_dict`` methods.

Each accessor returns the value when its type is right, the default when the key is missing or
null, and otherwise raises :class:`E2AValidationError` naming the dotted path of the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateways.e2a.errors import E2AValidationError


class FieldReader:
    """Reads fields of ``data``; ``path`` (e.g. ``"E2AEnvelope.auth"``) prefixes error names."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, Mapping):
            raise E2AValidationError(path, "a JSON object (dict)", data)
        self.data = data
        self.path = path

    def where(self, key: str) -> str:
        return f"{self.path}.{key}"

    def raw(self, key: str) -> Any:
        return self.data.get(key)

    def _typed(self, key: str, types: tuple[type, ...], expected: str) -> Any:
        value = self.data.get(key)
        if value is None:
            return None
        # bool is an int subclass; JSON true must not pass for a number or an id.
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise E2AValidationError(self.where(key), expected, value)
        return value

    def opt_str(self, key: str) -> str | None:
        return self._typed(key, (str,), "a string or null")

    def text(self, key: str, default: str) -> str:
        value = self.opt_str(key)
        return default if value is None else value

    def required_str(self, key: str) -> str:
        value = self.opt_str(key)
        if value is None:
            raise E2AValidationError(self.where(key), "a string (required)", value)
        return value

    def opt_stripped(self, key: str) -> str | None:
        """A string with surrounding blanks removed; blank counts as absent."""
        value = self.opt_str(key)
        return (value.strip() or None) if value is not None else None

    def opt_id(self, key: str) -> str | int | None:
        return self._typed(key, (str, int), "a string, an integer or null")

    def opt_int(self, key: str) -> int | None:
        return self._typed(key, (int,), "an integer or null")

    def flag(self, key: str, default: bool = False) -> bool:
        value = self._typed(key, (bool,), "true, false or null")
        return default if value is None else value

    def obj(self, key: str) -> dict[str, Any]:
        """A shallow copy of a nested object; ``{}`` when missing or null."""
        value = self._typed(key, (Mapping,), "a JSON object or null")
        return dict(value) if value is not None else {}

    def opt_obj(self, key: str) -> dict[str, Any] | None:
        value = self._typed(key, (Mapping,), "a JSON object or null")
        return dict(value) if value is not None else None

    def str_map(self, key: str) -> dict[str, str]:
        value = self.obj(key)
        for name, item in value.items():
            if not isinstance(item, str):
                raise E2AValidationError(f"{self.where(key)}.{name}", "a string", item)
        return value

    def str_list(self, key: str) -> list[str]:
        value = self._typed(key, (list, tuple), "a list of strings or null")
        if value is None:
            return []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise E2AValidationError(f"{self.where(key)}[{i}]", "a string", item)
        return list(value)

    def child(self, key: str) -> FieldReader | None:
        value = self.data.get(key)
        return None if value is None else FieldReader(value, self.where(key))
