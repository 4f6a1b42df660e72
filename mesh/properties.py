"""The MQTT v5 properties a mesh message carries, as one typed object.

On the wire the mesh uses two kinds of MQTT v5 properties (DESIGN, "Messages on the wire"):

- user properties, string pairs named as in Solace Agent Mesh: ``clientId``, ``userId``,
  ``replyTo``, ``a2aStatusTopic``, ``a2aUserConfig`` (JSON), ``authToken``, ``callDepth``,
  ``timestamp`` (ms) and ``traceparent``; plus ``a2aCallChain`` (JSON list of the agents a
  delegated request passed through), with which agents refuse call cycles; and on answers
  ``a2aInstance``, the replica that owns the task (its follow-ups go to that instance); and on
  requests ``a2aCallerToken``, the signed proof of the component that sent it
  (:mod:`mesh.trust.callers`);
- native v5 fields: Response Topic, Correlation Data, Content Type, Payload Format Indicator
  and Message Expiry Interval.

:class:`MessageProperties` holds both. The transport turns it into paho ``Properties`` on
publish and back on receipt; nothing else needs to know the wire names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

CLIENT_ID = "clientId"
USER_ID = "userId"
REPLY_TO = "replyTo"
STATUS_TOPIC = "a2aStatusTopic"
USER_CONFIG = "a2aUserConfig"
AUTH_TOKEN = "authToken"  # noqa: S105 - a user property's name
CALL_DEPTH = "callDepth"
TIMESTAMP = "timestamp"
TRACEPARENT = "traceparent"
CALL_CHAIN = "a2aCallChain"
INSTANCE = "a2aInstance"
CALLER_TOKEN = "a2aCallerToken"  # noqa: S105 - a user property's name

JSON_CONTENT_TYPE = "application/json"


@dataclass(slots=True)
class MessageProperties:
    """Routing and context data of one mesh message (user properties + native v5 fields).

    ``reply_to`` is written both as the ``replyTo`` user property (what SAM components read)
    and as the native Response Topic. ``extra`` keeps user properties the mesh does not know,
    in order, so a relay passes them on untouched.
    """

    client_id: str | None = None
    user_id: str | None = None
    reply_to: str | None = None
    status_topic: str | None = None
    user_config: dict[str, Any] | None = None
    auth_token: str | None = None
    call_depth: int | None = None
    timestamp_ms: int | None = None
    traceparent: str | None = None
    call_chain: list[str] | None = None
    instance: str | None = None
    caller_token: str | None = field(default=None, repr=False)  # a credential: never in a repr
    extra: list[tuple[str, str]] = field(default_factory=list)

    correlation_data: bytes | None = None
    content_type: str | None = None
    payload_format_utf8: bool = False
    message_expiry_s: int | None = None

    def user_properties(self) -> list[tuple[str, str]]:
        """The user-property pairs to publish, structured values JSON-encoded."""
        pairs: list[tuple[str, str]] = []
        if self.client_id is not None:
            pairs.append((CLIENT_ID, self.client_id))
        if self.user_id is not None:
            pairs.append((USER_ID, self.user_id))
        if self.reply_to is not None:
            pairs.append((REPLY_TO, self.reply_to))
        if self.status_topic is not None:
            pairs.append((STATUS_TOPIC, self.status_topic))
        if self.user_config is not None:
            pairs.append((USER_CONFIG, json.dumps(self.user_config, separators=(",", ":"))))
        if self.auth_token is not None:
            pairs.append((AUTH_TOKEN, self.auth_token))
        if self.call_depth is not None:
            pairs.append((CALL_DEPTH, str(self.call_depth)))
        if self.timestamp_ms is not None:
            pairs.append((TIMESTAMP, str(self.timestamp_ms)))
        if self.traceparent is not None:
            pairs.append((TRACEPARENT, self.traceparent))
        if self.call_chain is not None:
            pairs.append((CALL_CHAIN, json.dumps(self.call_chain, separators=(",", ":"))))
        if self.instance is not None:
            pairs.append((INSTANCE, self.instance))
        if self.caller_token is not None:
            pairs.append((CALLER_TOKEN, self.caller_token))
        pairs.extend(self.extra)
        return pairs

    @classmethod
    def from_wire(
        cls,
        user_properties: list[tuple[str, str]],
        *,
        response_topic: str | None = None,
        correlation_data: bytes | None = None,
        content_type: str | None = None,
        payload_format_utf8: bool = False,
        message_expiry_s: int | None = None,
    ) -> MessageProperties:
        """Read received properties back; malformed structured values are kept in ``extra``.

        A peer that sends ``callDepth=abc`` must not make the message unreadable: the
        runtime decides what a missing depth means, and the raw pair stays visible.
        """
        props = cls(
            correlation_data=correlation_data,
            content_type=content_type,
            payload_format_utf8=payload_format_utf8,
            message_expiry_s=message_expiry_s,
        )
        for key, value in user_properties:
            setter = _READERS.get(key)
            if setter is None or not setter(props, value):
                props.extra.append((key, value))
        if props.reply_to is None and response_topic:
            props.reply_to = response_topic
        return props

    def get_extra(self, key: str) -> str | None:
        """The first unknown user property named ``key``, if any."""
        for name, value in self.extra:
            if name == key:
                return value
        return None


def _set_str(attr: str) -> Any:
    def setter(props: MessageProperties, value: str) -> bool:
        setattr(props, attr, value)
        return True

    return setter


def _set_user_config(props: MessageProperties, value: str) -> bool:
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):  # absurd nesting too: the raw pair stays in extra
        return False
    if not isinstance(decoded, dict):
        return False
    props.user_config = decoded
    return True


def _set_call_chain(props: MessageProperties, value: str) -> bool:
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        return False
    if not isinstance(decoded, list) or not all(isinstance(name, str) for name in decoded):
        return False
    props.call_chain = decoded
    return True


def _set_int(attr: str) -> Any:
    def setter(props: MessageProperties, value: str) -> bool:
        try:
            setattr(props, attr, int(value))
        except ValueError:
            return False
        return True

    return setter


_READERS: dict[str, Any] = {
    CLIENT_ID: _set_str("client_id"),
    USER_ID: _set_str("user_id"),
    REPLY_TO: _set_str("reply_to"),
    STATUS_TOPIC: _set_str("status_topic"),
    USER_CONFIG: _set_user_config,
    AUTH_TOKEN: _set_str("auth_token"),
    CALL_DEPTH: _set_int("call_depth"),
    TIMESTAMP: _set_int("timestamp_ms"),
    TRACEPARENT: _set_str("traceparent"),
    CALL_CHAIN: _set_call_chain,
    INSTANCE: _set_str("instance"),
    CALLER_TOKEN: _set_str("caller_token"),
}
