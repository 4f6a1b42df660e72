"""Why a connection failed or was lost, in words: the connect errors of
:class:`~mesh.transport.connection.Connection` and the MQTT v5 DISCONNECT reasons it tells apart
(a takeover of the client id, the broker changing its rules, a broker gone).
"""

from __future__ import annotations

from paho.mqtt.reasoncodes import ReasonCode

from mesh.errors import ConnectError

__all__ = [
    "ADMINISTRATIVE_ACTION",
    "SESSION_TAKEN_OVER",
    "LostBeforeConnack",
    "NoConnack",
    "reason_value",
    "whose_connection",
    "why_lost",
]


class LostBeforeConnack(ConnectError):
    """The connection dropped before the broker's CONNACK; ``detail`` is paho's last error, if any."""

    def __init__(self, url: str, detail: str | None) -> None:
        super().__init__(f"the MQTT broker at {url} closed the connection before its CONNACK ({detail or 'no reason'})")
        self.detail = detail


class NoConnack(ConnectError):
    """No CONNACK came within the connect timeout."""


#: MQTT v5 DISCONNECT reason: another connection used this client id.
SESSION_TAKEN_OVER = 0x8E
_TAKEN_OVER = (
    ": another connection took this client id, a second instance of this component or someone holding its credentials"
)


_UNSPECIFIED = 0x80
#: MQTT v5 DISCONNECT reason "Administrative action": the broker's administrator, or its
#: dynamic-security plugin re-applying a user's changed rights, closed the connection.
ADMINISTRATIVE_ACTION = 0x98
_MAYBE_TAKEN_OVER = (
    ": the broker closed it; if its log says the client id was already connected, another connection took it"
)


def whose_connection(code: int) -> str:
    """What a lost connection's log line adds to name whose connection took the client id, if any."""
    return _TAKEN_OVER if code == SESSION_TAKEN_OVER else _MAYBE_TAKEN_OVER if code == _UNSPECIFIED else ""


def reason_value(reason: ReasonCode) -> int:
    value = getattr(reason, "value", 0)
    return value if isinstance(value, int) else 0


def why_lost(reason: ReasonCode) -> str:
    """The disconnect reason in words: paho reports a socket closed without DISCONNECT (a broker that
    stopped or restarted, a network drop) as "Unspecified error", which names nothing."""
    if reason.value == 128:
        return "the broker closed the connection: stopped, restarted or unreachable"
    return str(reason)
