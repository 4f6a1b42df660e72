"""Least privilege on the broker: what each component may read and publish (DESIGN, "Trust").

A component's broker username is its name (an agent's name, a gateway's id, a client's name);
:func:`rules_for` lists what that user may do, as topic filters in the broker's terms:

- **read** (subscribe and receive): an agent its request topic (also as ``$share/<agent>/...``,
  for replicas), its instance topics and its own answer topics; a gateway and a client their own
  answer topics; everyone the discovery tree of the namespace.
- **publish**: an agent its own card(s), answers in the six answer families
  (:data:`topics.ANSWER_TEMPLATES`) and requests to agents; a gateway its own card and requests;
  a client requests only.

Everything else is denied: other components' requests and answers, ``#``, ``$SYS``, other
namespaces, cards in another's name, the SAM heartbeat topic (whose cards registries accept by
the name inside) and topics outside the mesh. The client id plays no part: several connections
of one user (an agent's replicas, its name-ownership probe, a gateway's restarts) are one
identity. The rules are data; :mod:`mesh.brokertools.dynsec` turns them into the broker's file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from topics import (
    AGENT_REQUEST_TOPIC,
    ANSWER_TEMPLATES,
    get_agent_discovery_topic,
    get_agent_request_topic,
    get_agent_response_subscription_topic,
    get_agent_status_subscription_topic,
    get_client_response_topic,
    get_client_status_subscription_topic,
    get_discovery_rollcall_topic,
    get_discovery_subscription_topic,
    get_gateway_discovery_topic,
    get_gateway_response_subscription_topic,
    get_gateway_status_subscription_topic,
    shared_subscription,
    validate_identifier,
    validate_namespace,
)

__all__ = ["Identity", "Kind", "Rules", "rules_by_user", "rules_for"]

Kind = Literal["agent", "gateway", "client"]


@dataclass(frozen=True, slots=True)
class Identity:
    """A component as the broker knows it: its kind, its name (= username) and its namespace."""

    kind: Kind
    name: str
    namespace: str

    def __post_init__(self) -> None:
        validate_identifier(self.name, f"{self.kind} name")
        validate_namespace(self.namespace)


@dataclass(slots=True)
class Rules:
    """What one broker user may do: filters it may subscribe to (and receive from), and publish to."""

    kind: Kind
    read: list[str] = field(default_factory=list)
    publish: list[str] = field(default_factory=list)

    def add(self, other: Rules) -> None:
        self.read += [f for f in other.read if f not in self.read]
        self.publish += [f for f in other.publish if f not in self.publish]


def rules_for(identity: Identity) -> Rules:
    """The least-privilege rules of one component on its namespace."""
    ns, name = identity.namespace, identity.name
    requests = [AGENT_REQUEST_TOPIC.filter(namespace=ns), AGENT_REQUEST_TOPIC.filter(namespace=ns) + "/+"]
    discovery = get_discovery_subscription_topic(ns)
    rollcall = get_discovery_rollcall_topic(ns)  # every registry may ask who is there
    if identity.kind == "agent":
        own_requests = get_agent_request_topic(ns, name)
        card = get_agent_discovery_topic(ns, name)
        return Rules(
            "agent",
            read=[
                own_requests,
                shared_subscription(name, own_requests),  # replicas share the requests
                own_requests + "/+",  # a replica's instance topic (follow-ups to its tasks)
                get_agent_response_subscription_topic(ns, name),  # delegation answers, the name probe
                get_agent_status_subscription_topic(ns, name),
                discovery,
            ],
            # Its card, each replica's instance card, answers where a request asks, requests.
            publish=[card, card + "/+", *(t.filter(namespace=ns) for t in ANSWER_TEMPLATES), *requests, rollcall],
        )
    if identity.kind == "gateway":
        return Rules(
            "gateway",
            read=[
                get_gateway_response_subscription_topic(ns, name),
                get_gateway_status_subscription_topic(ns, name),
                discovery,
            ],
            publish=[get_gateway_discovery_topic(ns, name), *requests, rollcall],
        )
    return Rules(
        "client",
        read=[get_client_response_topic(ns, name), get_client_status_subscription_topic(ns, name), discovery],
        publish=[*requests, rollcall],
    )


def rules_by_user(identities: Iterable[Identity]) -> dict[str, Rules]:
    """The rules of every username; one name in several namespaces gets the union.

    One name of two kinds (an agent and a gateway both called ``http``) is refused: both would
    connect as one broker user, each with the other's rights.
    """
    users: dict[str, Rules] = {}
    for identity in identities:
        rules = rules_for(identity)
        known = users.get(identity.name)
        if known is None:
            users[identity.name] = rules
        elif known.kind != identity.kind:
            raise ValueError(
                f"{known.kind} {identity.name!r} and {identity.kind} {identity.name!r} would share the broker "
                "username; rename one of them"
            )
        else:
            known.add(rules)
    return users
