"""What the broker says it can do, read from its CONNACK (MQTT v5, section 3.2.2.3).

A property the broker leaves out means the feature is there (or the limit is MQTT's own), so
the defaults describe a full broker. The mesh acts on each: a shared (``$share/...``) or wildcard
subscription the broker cannot serve is refused before it is sent, with
:class:`UnsupportedByBrokerError` naming the limitation and the fix (ejabberd closes the
connection on a ``$share`` SUBSCRIBE, so sending it would loop on reconnects); retained
publishes go out unretained on a broker without retained messages (discovery then rests on the
roll call, DESIGN "Discovery and presence"); a broker that grants only QoS 0 is refused at
connect. Receive Maximum, Maximum Packet Size and Subscription Identifiers are applied by the
publisher and the inbound side; paho itself adopts the Server Keep Alive.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from mesh.errors import ConfigError, SubscribeError

__all__ = ["BrokerCapabilities", "UnsupportedByBrokerError"]

#: MQTT's own ceiling for a packet (268,435,455 bytes), when the broker names none.
MQTT_MAX_PACKET = 268_435_455


class UnsupportedByBrokerError(SubscribeError, ConfigError):
    """What the mesh asked for needs a feature the broker said (in CONNACK) it does not have.

    A configuration problem (exit 2), not an outage: retrying cannot help.
    """

    def __init__(self, message: str, *, topic_filter: str, feature: str) -> None:
        super().__init__(message, topic_filter=topic_filter, reason=f"unsupported: {feature}")
        self.feature = feature


@dataclass(frozen=True, slots=True)
class BrokerCapabilities:
    """The CONNACK's capability properties; the defaults are what an absent property means."""

    shared_subscriptions: bool = True
    retain: bool = True
    wildcard_subscriptions: bool = True
    subscription_identifiers: bool = True
    maximum_qos: int = 2
    receive_maximum: int = 65_535
    maximum_packet_size: int = MQTT_MAX_PACKET
    topic_alias_maximum: int = 0
    server_keep_alive: int | None = None
    assigned_client_identifier: str | None = None

    @classmethod
    def from_connack(cls, props: Any) -> BrokerCapabilities:
        """Read a paho ``Properties`` of a CONNACK (``None``: a broker that sent none)."""

        def read(name: str, default: Any) -> Any:
            return getattr(props, name, default) if props is not None else default

        return cls(
            shared_subscriptions=bool(read("SharedSubscriptionAvailable", 1)),
            retain=bool(read("RetainAvailable", 1)),
            wildcard_subscriptions=bool(read("WildcardSubscriptionAvailable", 1)),
            subscription_identifiers=bool(read("SubscriptionIdentifierAvailable", 1)),
            maximum_qos=int(read("MaximumQoS", 2)),
            receive_maximum=int(read("ReceiveMaximum", 65_535)),
            maximum_packet_size=int(read("MaximumPacketSize", MQTT_MAX_PACKET)),
            topic_alias_maximum=int(read("TopicAliasMaximum", 0)),
            server_keep_alive=read("ServerKeepAlive", None),
            assigned_client_identifier=read("AssignedClientIdentifier", None),
        )

    def describe(self) -> str:
        """One line of every capability, for the debug log."""
        return ", ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))

    def lacking(self) -> list[str]:
        """What the mesh would use and this broker lacks, each with its consequence."""
        found = []
        if not self.shared_subscriptions:
            found.append("shared subscriptions ($share): agents cannot run as replicas")
        if not self.retain:
            found.append("retained messages: cards are found by the roll call only")
        if not self.wildcard_subscriptions:
            found.append("wildcard subscriptions: discovery and answers cannot be received")
        if not self.subscription_identifiers:
            found.append("subscription identifiers: messages are routed by matching topics (slower)")
        if self.maximum_qos < 1:
            found.append("QoS 1: requests and answers cannot be acknowledged")
        return found

    def refusal(self, topic_filter: str, url: str) -> UnsupportedByBrokerError | None:
        """Why ``topic_filter`` cannot be subscribed on this broker, or ``None`` if it can."""
        if topic_filter.startswith("$share/") and not self.shared_subscriptions:
            return UnsupportedByBrokerError(
                f"the broker at {url} does not support shared subscriptions (its CONNACK says Shared "
                f"Subscription Available = 0), so {topic_filter!r} cannot be subscribed: replicas "
                "(shared_subscription: true) need them; run a single instance, or use a broker that has them "
                "(Mosquitto, EMQX, HiveMQ, VerneMQ; `mesh doctor` checks a broker)",
                topic_filter=topic_filter,
                feature="shared subscriptions",
            )
        if ("+" in topic_filter or "#" in topic_filter) and not self.wildcard_subscriptions:
            return UnsupportedByBrokerError(
                f"the broker at {url} does not support wildcard subscriptions (its CONNACK says Wildcard "
                f"Subscription Available = 0), so {topic_filter!r} cannot be subscribed: the mesh needs them "
                "for discovery and answers; enable them in the broker, or use another broker "
                "(`mesh doctor` checks a broker)",
                topic_filter=topic_filter,
                feature="wildcard subscriptions",
            )
        return None
