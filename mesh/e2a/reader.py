"""Typed reads from decoded JSON objects: the one reader of typed dicts in the gateways.

:class:`ObjectReader` reads the members of one object: each accessor returns the value when
its type is right, ``None`` when the member is missing or ``null``, and otherwise reports the
member's path (``E2AEnvelope.params.files[0].uri``) through :meth:`~ObjectReader.fail`. The
wire formats differ only in their dialect, a subclass:

- :class:`FieldReader`: E2A wire data (``from_dict``): keys as written, errors are
  :class:`~mesh.e2a.errors.E2AValidationError`, list items are ``key[i]``;
- ``ProtoObject`` (:mod:`mesh.profile.v1_requests`): A2A 1.0 ProtoJSON: camelCase or
  snake_case names, ``""`` absent, numbers also as strings, list items are ``key.i``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NoReturn, Self

from mesh.e2a.errors import E2AValidationError

__all__ = ["FieldReader", "ObjectReader"]


class ObjectReader:
    """Reads the members of ``data``, an object found at ``path`` (``"params.message"``)."""

    __slots__ = ("data", "path")

    #: How the path of a list item is written from the list's path and the item's index.
    ITEM_PATH: ClassVar[str] = "{}[{}]"
    #: Whether an empty string counts as absent (ProtoJSON: the default value is not sent).
    EMPTY_STRING_IS_ABSENT: ClassVar[bool] = False

    def __init__(self, data: Any, path: str) -> None:
        if data.__class__ is not dict and not isinstance(data, Mapping):
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

    def _checked(self, key: str, value: Any, types: tuple[type, ...], expected: str, kind: str) -> Any:
        """``value`` (not None, not of the exact class wanted) if it is of a subclass; bool is
        an int subclass, but JSON true must not pass for a number or an id."""
        if isinstance(value, types) and value.__class__ is not bool:
            return value
        self.fail(self.at(key), expected, value, kind)

    # Each reader takes the exact class of decoded JSON at once; _checked decides the rest.

    def string(self, key: str) -> str | None:
        value = self.raw(key)
        if value is not None and value.__class__ is not str:
            value = self._checked(key, value, (str,), "a string", "string_type")
        return None if self.EMPTY_STRING_IS_ABSENT and not value else value

    def required_string(self, key: str) -> str:
        value = self.string(key)
        if value is None:
            self.missing(self.at(key), "a string")
        return value

    def integer(self, key: str) -> int | None:
        value = self.raw(key)
        if value is not None and value.__class__ is not int:
            value = self._checked(key, value, (int,), "an integer", "int_type")
        result: int | None = value
        return result

    def boolean(self, key: str) -> bool | None:
        value = self.raw(key)
        if value is not None and value.__class__ is not bool:
            self.fail(self.at(key), "true or false", value, "bool_type")
        result: bool | None = value
        return result

    def _object(self, key: str) -> Mapping[str, Any] | None:
        value = self.raw(key)
        if value is not None and value.__class__ is not dict:
            value = self._checked(key, value, (Mapping,), "an object", "dict_type")
        result: Mapping[str, Any] | None = value
        return result

    def struct(self, key: str) -> dict[str, Any] | None:
        """A shallow copy of a nested object."""
        value = self._object(key)
        return None if value is None else dict(value)

    def child(self, key: str) -> Self | None:
        """A reader of the same dialect for a nested object."""
        value = self._object(key)
        return None if value is None else type(self)(value, self.at(key))

    def items(self, key: str) -> list[tuple[str, Any]]:
        """The items of a list with their paths; ``[]`` when missing."""
        value = self.raw(key)
        if value is None:
            return []
        if value.__class__ is not list:
            value = self._checked(key, value, (list, tuple), "an array", "list_type")
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
            if item.__class__ is not dict and not isinstance(item, Mapping):
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
        value = self.raw(key)
        if value is not None and value.__class__ is not str and value.__class__ is not int:
            value = self._checked(key, value, (str, int), "a string or an integer", "id_type")
        result: str | int | None = value
        return result

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
