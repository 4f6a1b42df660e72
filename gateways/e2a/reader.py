"""Typed reads from decoded JSON objects: the one reader of typed dicts in the gateways.

:class:`ObjectReader` reads the members of one object: each accessor returns the value when
its type is right, ``None`` when the member is missing or ``null``, and otherwise reports the
member's path (``E2AEnvelope.params.files[0].uri``) through :meth:`~ObjectReader.fail`. The
wire formats differ only in their dialect, a subclass:

- :class:`FieldReader`: E2A wire data (``from_dict``): keys as written, errors are
  :class:`~gateways.e2a.errors.E2AValidationError`, list items are ``key[i]``;
- ``ProtoObject`` (:mod:`gateways.http.a2a_v1_requests`): A2A 1.0 ProtoJSON: camelCase or
  snake_case names, ``""`` absent, numbers also as strings, list items are ``key.i``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NoReturn, Self

from gateways.e2a.errors import E2AValidationError

__all__ = ["FieldReader", "ObjectReader"]

# dict first: isinstance() tries the tuple in order, and decoded JSON is always a dict.
_OBJECT = (dict, Mapping)
_ARRAY = (list, tuple)


class ObjectReader:
    """Reads the members of ``data``, an object found at ``path`` (``"params.message"``)."""

    __slots__ = ("data", "path")

    #: How the path of a list item is written from the list's path and the item's index.
    ITEM_PATH: ClassVar[str] = "{}[{}]"
    #: Whether an empty string counts as absent (ProtoJSON: the default value is not sent).
    EMPTY_STRING_IS_ABSENT: ClassVar[bool] = False

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, _OBJECT):
            self.fail(path, "an object", data, "dict_type")
        self.data: Mapping[str, Any] = data
        self.path = path

    # ------------------------------------------------------------ the dialect

    def fail(self, path: str, expected: str, value: Any, kind: str) -> NoReturn:
        """Report the member at ``path``: not ``expected`` (``"a string"``); ``kind`` names the check."""
        raise NotImplementedError

    def missing(self, path: str, expected: str) -> NoReturn:
        """Report the required member at ``path`` as absent."""
        raise NotImplementedError

    def raw(self, key: str) -> Any:
        """The member as decoded, ``None`` when missing."""
        return self.data.get(key)

    # ------------------------------------------------------------ typed members

    def at(self, key: str) -> str:
        """The path of member ``key``."""
        return f"{self.path}.{key}"

    def _typed(self, key: str, types: tuple[type, ...], expected: str, kind: str) -> Any:
        value = self.raw(key)
        if value is None:
            return None
        # bool is an int subclass; JSON true must not pass for a number or an id.
        if not isinstance(value, types) or (value.__class__ is bool and bool not in types):
            self.fail(self.at(key), expected, value, kind)
        return value

    def string(self, key: str) -> str | None:
        value: str | None = self._typed(key, (str,), "a string", "string_type")
        return None if self.EMPTY_STRING_IS_ABSENT and not value else value

    def required_string(self, key: str) -> str:
        value = self.string(key)
        if value is None:
            self.missing(self.at(key), "a string")
        return value

    def integer(self, key: str) -> int | None:
        value: int | None = self._typed(key, (int,), "an integer", "int_type")
        return value

    def boolean(self, key: str) -> bool | None:
        value: bool | None = self._typed(key, (bool,), "true or false", "bool_type")
        return value

    def struct(self, key: str) -> dict[str, Any] | None:
        """A shallow copy of a nested object."""
        value = self._typed(key, _OBJECT, "an object", "dict_type")
        return None if value is None else dict(value)

    def child(self, key: str) -> Self | None:
        """A reader of the same dialect for a nested object."""
        value = self._typed(key, _OBJECT, "an object", "dict_type")
        return None if value is None else type(self)(value, self.at(key))

    def items(self, key: str) -> list[tuple[str, Any]]:
        """The items of a list with their paths; ``[]`` when missing."""
        value = self._typed(key, _ARRAY, "an array", "list_type")
        if value is None:
            return []
        at, path = self.ITEM_PATH, self.at(key)
        return [(at.format(path, i), item) for i, item in enumerate(value)]

    def strings(self, key: str) -> list[str]:
        """A list of strings; ``[]`` when missing."""
        items = self.items(key)
        for path, item in items:
            if not isinstance(item, str):
                self.fail(path, "a string", item, "string_type")
        return [item for _, item in items]

    def children(self, key: str) -> list[Self]:
        """Readers of the objects of a list; ``[]`` when missing."""
        readers = []
        for path, item in self.items(key):
            if not isinstance(item, _OBJECT):
                self.fail(path, "an object", item, "dict_type")
            readers.append(type(self)(item, path))
        return readers


class FieldReader(ObjectReader):
    """E2A wire data (``from_dict``): ``path`` (e.g. ``"E2AEnvelope.auth"``) prefixes error names."""

    __slots__ = ()

    def fail(self, path: str, expected: str, value: Any, kind: str) -> NoReturn:
        raise E2AValidationError(path, expected, value)

    def missing(self, path: str, expected: str) -> NoReturn:
        raise E2AValidationError(path, f"{expected} (required)", None)

    def text(self, key: str, default: str) -> str:
        value = self.string(key)
        return default if value is None else value

    def stripped(self, key: str) -> str | None:
        """A string with surrounding blanks removed; blank counts as absent."""
        value = self.string(key)
        return (value.strip() or None) if value is not None else None

    def identifier(self, key: str) -> str | int | None:
        """A JSON-RPC id: a string or an integer."""
        value: str | int | None = self._typed(key, (str, int), "a string or an integer", "id_type")
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.boolean(key)
        return default if value is None else value

    def obj(self, key: str) -> dict[str, Any]:
        """A shallow copy of a nested object; ``{}`` when missing or null."""
        return self.struct(key) or {}

    def str_map(self, key: str) -> dict[str, str]:
        value = self.obj(key)
        for name, item in value.items():
            if not isinstance(item, str):
                self.fail(f"{self.at(key)}.{name}", "a string", item, "string_type")
        return value
