"""A2A 1.0 JSON-RPC requests as the mesh's A2A 0.3 requests; the 1.0 method and version tables.

1.0 params are the ProtoJSON of a2a-sdk's ``lf.a2a.v1`` request messages. They are read the
way a2a-sdk 1.3's server reads them (``ParseDict(..., ignore_unknown_fields=True)``, then its
REQUIRED-field check): camelCase or proto (snake_case) member names, ``null`` or ``""`` meaning
absent, enums by name or number, integers also as strings, unknown members ignored. Two things
are stricter than ParseDict: an unknown enum name and invalid base64 are errors instead of being
read as 0 / empty. The first bad member raises :class:`InvalidParams` naming its path
(``params.message.parts.1.raw: ...``), with ``data={"method", "errors": [{path, reason, type}]}``
like :func:`mesh.a2a.parse_request`.

Mapping (1.0 -> 0.3):

- parts: ``{text}`` -> TextPart; ``{raw}`` -> FilePart ``{bytes}``; ``{url}`` -> FilePart ``{uri}``
  (``mediaType``/``filename`` -> ``mimeType``/``name``); ``{data}`` -> DataPart, a non-object
  ``data`` wrapped as ``{"value": data}`` with metadata ``data_part_compat: true`` (a2a-sdk's
  rule). A text or data part keeps ``mediaType``/``filename`` as extra keys, which the mesh's
  models keep and relay, so they come back unchanged on the way out.
- ``ROLE_USER``/``ROLE_AGENT`` -> ``user``/``agent``; ``TASK_STATE_X`` -> the 0.3 state.
- ``configuration.returnImmediately`` -> ``blocking = not returnImmediately``, always written,
  because 1.0 without a configuration means blocking;
  ``configuration.taskPushNotificationConfig`` (flat) -> ``pushNotificationConfig``;
  ``authentication.scheme`` -> ``authentication.schemes = [scheme]``.
- Task ids: ``GetTask``/``CancelTask``/``SubscribeToTask`` ``{id}`` -> ``{id}``; push configs
  ``{taskId, id}`` -> ``{id: taskId, pushNotificationConfigId: id}``.
- Dropped: ``tenant`` (the mesh has none) and the ``pageSize``/``pageToken`` of
  ``ListTaskPushNotificationConfigs`` (the mesh answers with every config of the task).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from types import MappingProxyType
from typing import Any, Final, Literal, NoReturn, TypeVar

from mesh.a2a import METHOD_ALIASES, METHOD_PARAMS, InvalidParams, Method, MethodNotFound, RpcError
from mesh.a2a.methods import STREAMING_METHODS
from mesh.a2a.validation import short_repr
from mesh.e2a.reader import ObjectReader
from mesh.profile.v1 import DATA_PART_COMPAT, JSON, ROLE_FROM_V1, ROLE_NAMES, normalize_base64

T = TypeVar("T")

# ---------------------------------------------------------------- methods and versions

#: Every A2A 1.0 JSON-RPC method and the mesh method it becomes; ``None``: answered by the
#: gateway itself (``ListTasks`` from its own records; ``GetExtendedAgentCard`` with -32007).
V1_METHODS: Mapping[str, Method | None] = MappingProxyType(
    {**{m.v1_name: m for m in Method}, "ListTasks": None, "GetExtendedAgentCard": None}
)
#: The 1.0 methods answered with an SSE stream of ``StreamResponse`` objects.
V1_STREAMING_METHODS: Final = frozenset(m.v1_name for m in STREAMING_METHODS)
#: A2A 1.0 error codes the mesh's 0.3 exception tree has no class for (raise ``RpcError(code=...)``).
EXTENSION_SUPPORT_REQUIRED: Final = -32008
VERSION_NOT_SUPPORTED: Final = -32009

_V0_3_METHODS = frozenset([*map(str, METHOD_PARAMS), *METHOD_ALIASES])


def mesh_method(method: str) -> Method | None:
    """The mesh method a 1.0 method is forwarded as (``None``: the gateway answers it).

    Raises :class:`MethodNotFound` for a name that is not an A2A 1.0 method.
    """
    try:
        return V1_METHODS[method]
    except (KeyError, TypeError):
        _unknown_method(method)


def _unknown_method(method: Any) -> NoReturn:
    hint = ""
    if method in _V0_3_METHODS:
        hint = " (an A2A 0.3 method: send it without the A2A-Version header)"
    raise MethodNotFound(
        f"method {short_repr(method)} is not an A2A 1.0 method{hint}; supported methods: {', '.join(V1_METHODS)}",
        data={"method": str(method)[:200], "supported": list(V1_METHODS)},
    )


def negotiate_version(method: str, header: str | None) -> Literal["0.3", "1.0"]:
    """The A2A version of a request from its ``A2A-Version`` header, checked against its method.

    As in a2a-sdk 1.3: a missing or empty header means 0.3, a header is matched on its major
    version (``1.0.1`` -> 1.0, ``0.3.0`` -> 0.3), and a 1.0 method under 0.3 (or a 0.3 method
    under 1.0) is refused. Raises ``RpcError`` -32009 (VersionNotSupported) naming the fix.
    """
    text = (header or "").strip()
    version: Literal["0.3", "1.0"] | None = "0.3" if not text else None
    method = method if isinstance(method, str) else ""  # a non-string method fails later, on its own
    if match := re.fullmatch(r"(\d{1,6})(?:\.\d+){0,2}", text):
        version = {0: "0.3", 1: "1.0"}.get(int(match.group(1)))  # type: ignore[assignment]
    if version is None:
        reason = f"A2A version {short_repr(text)} is not supported; supported versions: 1.0, 0.3"
    elif version == "0.3" and method in V1_METHODS:
        reason = f"{method} is an A2A 1.0 method: send the header A2A-Version: 1.0"
    elif version == "1.0" and method in _V0_3_METHODS:
        reason = f"{method} is an A2A 0.3 method: send it without A2A-Version (or with 0.3)"
    else:
        return version
    raise RpcError(reason, code=VERSION_NOT_SUPPORTED, data={"version": text[:50], "method": str(method)[:200]})


# ---------------------------------------------------------------- reading ProtoJSON


class BadMember(Exception):
    """A bad member at ``path``; :func:`read_params` turns it into InvalidParams."""

    def __init__(self, path: str, reason: str, kind: str = "value_error") -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason, self.kind = path, reason, kind


_INT32 = (-(2**31), 2**31 - 1)
_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}


def _got(value: Any) -> str:
    return f"got {_JSON_TYPES.get(type(value), 'number')} {short_repr(value, 40)}"


@cache
def _proto_name(name: str) -> str:
    return re.sub(r"([A-Z])", r"_\1", name).lower()


class ProtoObject(ObjectReader):
    """A ProtoJSON object being read and its path in the request (``params.message``).

    Member readers return ``None`` for an absent member (``null`` and ``""`` are absent too),
    find a member by its camelCase or proto (snake_case) name, and raise :class:`BadMember`
    for a member of the wrong type.
    """

    __slots__ = ()
    ITEM_PATH = "{}.{}"
    EMPTY_STRING_IS_ABSENT = True

    def fail(self, path: str, expected: str, value: Any, kind: str) -> NoReturn:
        raise BadMember(path, f"must be {expected}, {_got(value)}", kind)

    def missing(self, path: str, expected: str) -> NoReturn:
        raise BadMember(path, "required", "missing")

    def raw(self, key: str) -> Any:
        value = self.data.get(key)
        return self.data.get(_proto_name(key)) if value is None else value

    def has(self, key: str) -> bool:
        return key in self.data or _proto_name(key) in self.data

    def integer(self, key: str, *, minimum: int = _INT32[0], maximum: int = _INT32[1]) -> int | None:
        """An int32 (bounds as given); ProtoJSON also takes numbers as strings (``"5"``, ``"1e2"``)."""
        value = self.raw(key)
        if value is None:
            return None
        number: Any = None
        if type(value) is int or (type(value) is float and value.is_integer()):
            number = int(value)
        elif type(value) is str:
            try:
                as_float = float(value)
            except ValueError:
                as_float = 0.5
            number = int(as_float) if as_float.is_integer() else None
        if number is None:
            self.fail(self.at(key), "an integer", value, "int_type")
        if not minimum <= number <= maximum:
            raise BadMember(self.at(key), f"must be in [{minimum}, {maximum}], got {number}", "range")
        return int(number)

    def enum(self, key: str, names: tuple[str, ...]) -> str:
        """The enum name (``names[0]``, UNSPECIFIED, when absent)."""
        value = self.raw(key)
        if value is None:
            return names[0]
        if type(value) is int and 0 <= value < len(names):
            return names[value]
        if type(value) is str and value in names:
            return value
        self.fail(self.at(key), f"one of {', '.join(names)}", value, "enum")


def _put(target: JSON, key: str, value: Any) -> None:
    if value is not None:
        target[key] = value


# ---------------------------------------------------------------- messages and parts

_PART_CONTENT = ("text", "raw", "url", "data")


def part_from_v1(part: ProtoObject) -> JSON:
    """A 1.0 ``Part`` as 0.3 JSON (``kind: text | file | data``)."""
    present = [key for key in _PART_CONTENT if (part.has(key) if key == "data" else part.raw(key) is not None)]
    if len(present) != 1:
        found = f"got {', '.join(present)}" if present else "got none"
        raise BadMember(part.path, f"must have exactly one of text, raw, url or data ({found})", "part_content")
    media_type, filename = part.string("mediaType"), part.string("filename")
    metadata = part.struct("metadata")
    out: JSON
    if present == ["text"]:
        out = {"kind": "text", "text": part.string("text") or ""}  # "" is a set oneof member
    elif present == ["data"]:
        data = part.raw("data")
        if type(data) is not dict:
            data, metadata = {"value": data}, {**(metadata or {}), DATA_PART_COMPAT: True}
        out = {"kind": "data", "data": data}
    else:
        file: JSON
        if present == ["raw"]:
            raw = part.string("raw") or ""
            try:
                file = {"bytes": normalize_base64(raw)}
            except ValueError as exc:
                raise BadMember(part.at("raw"), str(exc), "base64") from None
        else:
            file = {"uri": part.required_string("url")}
        _put(file, "mimeType", media_type)
        _put(file, "name", filename)
        out = {"kind": "file", "file": file}
        media_type = filename = None
    _put(out, "mediaType", media_type)  # text and data parts: relayed as extra keys
    _put(out, "filename", filename)
    _put(out, "metadata", metadata)
    return out


def message_from_v1(msg: ProtoObject, *, role_default: str | None = None) -> JSON:
    """A 1.0 ``Message`` as 0.3 JSON (``kind: message``); ``role_default`` stands in for a missing role."""
    role = msg.enum("role", ROLE_NAMES)
    if role == ROLE_NAMES[0] and role_default is not None:
        role = role_default
    if role == ROLE_NAMES[0]:
        raise BadMember(msg.at("role"), "required: ROLE_USER or ROLE_AGENT", "missing")
    out: JSON = {"kind": "message", "messageId": msg.required_string("messageId")}
    out["role"] = ROLE_FROM_V1[role].value
    parts = msg.children("parts")
    if not parts:
        raise BadMember(msg.at("parts"), "required: at least one part", "missing")
    out["parts"] = [part_from_v1(p) for p in parts]
    for key in ("contextId", "taskId"):
        _put(out, key, msg.string(key))
    for key in ("referenceTaskIds", "extensions"):
        _put(out, key, msg.strings(key) or None)
    _put(out, "metadata", msg.struct("metadata"))
    return out


def _push_config(config: ProtoObject) -> JSON:
    """A flat 1.0 ``TaskPushNotificationConfig`` as a 0.3 ``PushNotificationConfig``, marked
    (``a2aVersion``, a mesh extension) so the agent POSTs 1.0 ``StreamResponse`` bodies to it."""
    out: JSON = {"url": config.required_string("url"), "a2aVersion": "1.0"}
    _put(out, "id", config.string("id"))
    _put(out, "token", config.string("token"))
    auth = config.child("authentication")
    if auth is not None:
        authentication: JSON = {"schemes": [auth.required_string("scheme")]}
        _put(authentication, "credentials", auth.string("credentials"))
        out["authentication"] = authentication
    return out


# ---------------------------------------------------------------- per-method params


def _send_message(params: ProtoObject) -> JSON:
    message = params.child("message")
    if message is None:
        raise BadMember(params.at("message"), "required", "missing")
    config = params.child("configuration")
    configuration: JSON = {"blocking": True}
    if config is not None:
        configuration["blocking"] = not config.boolean("returnImmediately")
        _put(configuration, "acceptedOutputModes", config.strings("acceptedOutputModes") or None)
        _put(configuration, "historyLength", config.integer("historyLength", minimum=0))
        push = config.child("taskPushNotificationConfig")
        if push is not None:
            configuration["pushNotificationConfig"] = _push_config(push)
    out: JSON = {"message": message_from_v1(message), "configuration": configuration}
    _put(out, "metadata", params.struct("metadata"))
    return out


def _task_query(params: ProtoObject) -> JSON:
    out: JSON = {"id": params.required_string("id")}
    _put(out, "historyLength", params.integer("historyLength", minimum=0))
    return out


def _task_id(params: ProtoObject) -> JSON:
    out: JSON = {"id": params.required_string("id")}
    _put(out, "metadata", params.struct("metadata"))
    return out


def _push_set(params: ProtoObject) -> JSON:
    return {"taskId": params.required_string("taskId"), "pushNotificationConfig": _push_config(params)}


def _push_get(params: ProtoObject) -> JSON:
    return {
        "id": params.required_string("taskId"),
        "pushNotificationConfigId": params.required_string("id"),
    }


def _push_list(params: ProtoObject) -> JSON:
    params.integer("pageSize", minimum=0)
    params.string("pageToken")
    return {"id": params.required_string("taskId")}


_TRANSLATORS: dict[str, Callable[[ProtoObject], JSON]] = {
    method.v1_name: translate
    for method, translate in {
        Method.message_send: _send_message,
        Method.message_stream: _send_message,
        Method.tasks_get: _task_query,
        Method.tasks_cancel: _task_id,
        Method.tasks_resubscribe: _task_id,
        Method.push_config_set: _push_set,
        Method.push_config_get: _push_get,
        Method.push_config_list: _push_list,
        Method.push_config_delete: _push_get,
    }.items()
}


def read_params(method: str, params: Any, read: Callable[[ProtoObject], T]) -> T:
    """Apply ``read`` to a request's ``params``; a :class:`BadMember` becomes :class:`InvalidParams`."""
    if params is None:  # a2a-sdk reads a missing params as {}
        params = {}
    try:
        if type(params) is not dict:
            raise BadMember("params", f"must be an object of named params, {_got(params)}", "params")
        return read(ProtoObject(params, "params"))
    except BadMember as bad:
        error = {"path": bad.path, "reason": bad.reason, "type": bad.kind}
        raise InvalidParams(f"invalid params for {method}: {bad}", data={"method": method, "errors": [error]}) from None


def params_from_v1(method: str, params: Any) -> tuple[Method, JSON]:
    """The mesh method and 0.3 params (camelCase, with ``kind``) for a 1.0 request.

    ``params`` is the request's decoded ``params`` member. The result validates with
    ``mesh.a2a.METHOD_PARAMS[mesh_method]``. Raises :class:`MethodNotFound` for an unknown
    method and :class:`InvalidParams` for bad params; ``ValueError`` for ``ListTasks`` and
    ``GetExtendedAgentCard``, which the gateway answers itself (see :data:`V1_METHODS`).
    """
    target = mesh_method(method)
    if target is None:
        raise ValueError(f"{method} has no mesh method: the gateway answers it (see V1_METHODS)")
    return target, read_params(method, params, _TRANSLATORS[method])
