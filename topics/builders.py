"""The A2A topic hierarchy under ``{namespace}/a2a/v1``, with SAM's helper names.

The helpers keep the names and arguments of SAM's ``common/a2a/protocol.py``
so SAM code ports directly, with two differences: every argument is validated,
and subscription helpers return MQTT filters (``.../+``, ``.../#``) where SAM
returns Solace ones (``.../>``).

Each topic shape is a module-level :class:`TopicTemplate`, the one definition
shared by the builders, the subscription filters and the parsers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .templates import TopicTemplate
from .validation import validate_namespace

__all__ = [
    "A2A_BASE",
    "AGENT_CARDS_TOPIC",
    "AGENT_CARD_TOPIC",
    "AGENT_INSTANCE_CARD_TOPIC",
    "AGENT_INSTANCE_REQUEST_TOPIC",
    "AGENT_REQUEST_TOPIC",
    "AGENT_RESPONSE_TOPIC",
    "AGENT_STATUS_TOPIC",
    "CLIENT_RESPONSE_TOPIC",
    "CLIENT_STATUS_TOPIC",
    "GATEWAY_CARDS_TOPIC",
    "GATEWAY_CARD_TOPIC",
    "GATEWAY_RESPONSE_TOPIC",
    "GATEWAY_STATUS_TOPIC",
    "ROLLCALL_TOPIC",
    "CardKind",
    "DiscoveryTopic",
    "get_a2a_base_topic",
    "get_agent_discovery_topic",
    "get_agent_instance_discovery_topic",
    "get_agent_instance_request_topic",
    "get_agent_request_topic",
    "get_agent_response_subscription_topic",
    "get_agent_response_topic",
    "get_agent_status_subscription_topic",
    "get_client_response_topic",
    "get_client_status_subscription_topic",
    "get_client_status_topic",
    "get_discovery_subscription_topic",
    "get_gateway_discovery_topic",
    "get_gateway_response_subscription_topic",
    "get_gateway_response_topic",
    "get_gateway_status_subscription_topic",
    "get_gateway_status_topic",
    "get_peer_agent_status_topic",
    "get_rollcall_topic",
    "parse_discovery_topic",
    "parse_instance_card_topic",
]

A2A_BASE = TopicTemplate("{namespace}/a2a/v1")
AGENT_REQUEST_TOPIC = TopicTemplate("{namespace}/a2a/v1/agent/request/{agent_name}")
# One replica's own request topic: follow-ups for the tasks it owns.
AGENT_INSTANCE_REQUEST_TOPIC = TopicTemplate("{namespace}/a2a/v1/agent/request/{agent_name}/{instance}")
AGENT_RESPONSE_TOPIC = TopicTemplate("{namespace}/a2a/v1/agent/response/{delegating_agent_name}/{sub_task_id}")
AGENT_STATUS_TOPIC = TopicTemplate("{namespace}/a2a/v1/agent/status/{delegating_agent_name}/{sub_task_id}")
GATEWAY_RESPONSE_TOPIC = TopicTemplate("{namespace}/a2a/v1/gateway/response/{gateway_id}/{task_id}")
GATEWAY_STATUS_TOPIC = TopicTemplate("{namespace}/a2a/v1/gateway/status/{gateway_id}/{task_id}")
CLIENT_RESPONSE_TOPIC = TopicTemplate("{namespace}/a2a/v1/client/response/{client_id}")
CLIENT_STATUS_TOPIC = TopicTemplate("{namespace}/a2a/v1/client/status/{client_id}/{task_id}")
# Retained, one per agent / gateway; the bare SAM topics carry non-retained heartbeats.
AGENT_CARD_TOPIC = TopicTemplate("{namespace}/a2a/v1/discovery/agentcards/{agent_name}")
# One replica's card (retained, cleared by its will); the shared card is cleared by the last one.
AGENT_INSTANCE_CARD_TOPIC = TopicTemplate("{namespace}/a2a/v1/discovery/agentcards/{agent_name}/{instance}")
GATEWAY_CARD_TOPIC = TopicTemplate("{namespace}/a2a/v1/discovery/gatewaycards/{gateway_id}")
AGENT_CARDS_TOPIC = TopicTemplate("{namespace}/a2a/v1/discovery/agentcards")
GATEWAY_CARDS_TOPIC = TopicTemplate("{namespace}/a2a/v1/discovery/gatewaycards")
_DISCOVERY = TopicTemplate("{namespace}/a2a/v1/discovery")


def get_a2a_base_topic(namespace: str) -> str:
    """``{ns}/a2a/v1``"""
    return A2A_BASE.build(namespace=namespace)


def get_agent_request_topic(namespace: str, agent_name: str) -> str:
    """``{ns}/a2a/v1/agent/request/{agent_name}``: where an agent receives tasks."""
    return AGENT_REQUEST_TOPIC.build(namespace=namespace, agent_name=agent_name)


def get_agent_instance_request_topic(namespace: str, agent_name: str, instance: str) -> str:
    """``{ns}/a2a/v1/agent/request/{agent_name}/{instance}``: one replica's follow-ups."""
    return AGENT_INSTANCE_REQUEST_TOPIC.build(namespace=namespace, agent_name=agent_name, instance=instance)


def get_agent_response_topic(namespace: str, delegating_agent_name: str, sub_task_id: str) -> str:
    """``{ns}/a2a/v1/agent/response/{delegating_agent_name}/{sub_task_id}``.

    Where the agent that ran a delegated task sends its final answer.
    """
    return AGENT_RESPONSE_TOPIC.build(
        namespace=namespace,
        delegating_agent_name=delegating_agent_name,
        sub_task_id=sub_task_id,
    )


def get_peer_agent_status_topic(namespace: str, delegating_agent_name: str, sub_task_id: str) -> str:
    """``{ns}/a2a/v1/agent/status/{delegating_agent_name}/{sub_task_id}``.

    Where the agent that runs a delegated task streams its updates.
    """
    return AGENT_STATUS_TOPIC.build(
        namespace=namespace,
        delegating_agent_name=delegating_agent_name,
        sub_task_id=sub_task_id,
    )


def get_agent_response_subscription_topic(namespace: str, agent_name: str) -> str:
    """``{ns}/a2a/v1/agent/response/{agent_name}/+``: answers to its delegations."""
    return AGENT_RESPONSE_TOPIC.filter(namespace=namespace, delegating_agent_name=agent_name)


def get_agent_status_subscription_topic(namespace: str, agent_name: str) -> str:
    """``{ns}/a2a/v1/agent/status/{agent_name}/+``: updates on its delegations."""
    return AGENT_STATUS_TOPIC.filter(namespace=namespace, delegating_agent_name=agent_name)


def get_gateway_response_topic(namespace: str, gateway_id: str, task_id: str) -> str:
    """``{ns}/a2a/v1/gateway/response/{gateway_id}/{task_id}``"""
    return GATEWAY_RESPONSE_TOPIC.build(namespace=namespace, gateway_id=gateway_id, task_id=task_id)


def get_gateway_status_topic(namespace: str, gateway_id: str, task_id: str) -> str:
    """``{ns}/a2a/v1/gateway/status/{gateway_id}/{task_id}``"""
    return GATEWAY_STATUS_TOPIC.build(namespace=namespace, gateway_id=gateway_id, task_id=task_id)


def get_gateway_response_subscription_topic(namespace: str, gateway_id: str) -> str:
    """``{ns}/a2a/v1/gateway/response/{gateway_id}/+``"""
    return GATEWAY_RESPONSE_TOPIC.filter(namespace=namespace, gateway_id=gateway_id)


def get_gateway_status_subscription_topic(namespace: str, gateway_id: str) -> str:
    """``{ns}/a2a/v1/gateway/status/{gateway_id}/+``"""
    return GATEWAY_STATUS_TOPIC.filter(namespace=namespace, gateway_id=gateway_id)


def get_client_response_topic(namespace: str, client_id: str) -> str:
    """``{ns}/a2a/v1/client/response/{client_id}``: answers without ``replyTo``."""
    return CLIENT_RESPONSE_TOPIC.build(namespace=namespace, client_id=client_id)


def get_client_status_topic(namespace: str, client_id: str, task_id: str) -> str:
    """``{ns}/a2a/v1/client/status/{client_id}/{task_id}``"""
    return CLIENT_STATUS_TOPIC.build(namespace=namespace, client_id=client_id, task_id=task_id)


def get_client_status_subscription_topic(namespace: str, client_id: str) -> str:
    """``{ns}/a2a/v1/client/status/{client_id}/+``"""
    return CLIENT_STATUS_TOPIC.filter(namespace=namespace, client_id=client_id)


def get_agent_discovery_topic(namespace: str, agent_name: str | None = None) -> str:
    """``{ns}/a2a/v1/discovery/agentcards/{agent_name}``: the agent's retained card.

    Without a name, SAM's bare ``{ns}/a2a/v1/discovery/agentcards``.
    """
    if agent_name is None:
        return AGENT_CARDS_TOPIC.build(namespace=namespace)
    return AGENT_CARD_TOPIC.build(namespace=namespace, agent_name=agent_name)


def get_agent_instance_discovery_topic(namespace: str, agent_name: str, instance: str) -> str:
    """``{ns}/a2a/v1/discovery/agentcards/{agent_name}/{instance}``: one replica's card."""
    return AGENT_INSTANCE_CARD_TOPIC.build(namespace=namespace, agent_name=agent_name, instance=instance)


def parse_instance_card_topic(namespace: str, topic: str) -> tuple[str, str] | None:
    """``(agent, instance)`` of a replica's card topic in ``namespace``, else ``None``."""
    params = AGENT_INSTANCE_CARD_TOPIC.match(topic)
    if params is None or params["namespace"] != validate_namespace(namespace):
        return None
    return params["agent_name"], params["instance"]


def get_gateway_discovery_topic(namespace: str, gateway_id: str | None = None) -> str:
    """``{ns}/a2a/v1/discovery/gatewaycards/{gateway_id}``: the gateway's retained card.

    Without an id, SAM's bare ``{ns}/a2a/v1/discovery/gatewaycards``.
    """
    if gateway_id is None:
        return GATEWAY_CARDS_TOPIC.build(namespace=namespace)
    return GATEWAY_CARD_TOPIC.build(namespace=namespace, gateway_id=gateway_id)


def get_discovery_subscription_topic(namespace: str) -> str:
    """``{ns}/a2a/v1/discovery/#``: every agent and gateway card."""
    return f"{_DISCOVERY.build(namespace=namespace)}/#"


ROLLCALL_TOPIC = TopicTemplate("{namespace}/a2a/v1/rollcall")


def get_rollcall_topic(namespace: str) -> str:
    """``{ns}/a2a/v1/rollcall``: a registry asks who is there; every live agent and gateway
    answers by publishing its card again (DESIGN, "Discovery and presence"). Outside the
    discovery tree, where SAM gateways read every message as a card."""
    return ROLLCALL_TOPIC.build(namespace=namespace)


def get_discovery_rollcall_topic(namespace: str) -> str:
    """``{ns}/a2a/v1/discovery/rollcall``: where roll calls went before :func:`get_rollcall_topic`
    (inside SAM's card subtree). Still heard, so components of the previous release that call
    there are answered; nothing publishes there any more. To be dropped in the next release."""
    return f"{_DISCOVERY.build(namespace=namespace)}/rollcall"


CardKind = Literal["agent", "gateway"]


@dataclass(frozen=True, slots=True)
class DiscoveryTopic:
    """What a topic under ``{ns}/a2a/v1/discovery`` announces."""

    kind: CardKind
    name: str | None  # None: the bare SAM topic; the card itself names the sender


_CARD_TOPICS: tuple[tuple[CardKind, TopicTemplate, str, TopicTemplate], ...] = (
    ("agent", AGENT_CARD_TOPIC, "agent_name", AGENT_CARDS_TOPIC),
    ("gateway", GATEWAY_CARD_TOPIC, "gateway_id", GATEWAY_CARDS_TOPIC),
)


def parse_discovery_topic(namespace: str, topic: str) -> DiscoveryTopic | None:
    """Tell whose card *topic* carries in *namespace*; ``None`` if not a card topic."""
    namespace = validate_namespace(namespace)
    for kind, named, param, bare in _CARD_TOPICS:
        params = named.match(topic)
        if params is not None and params["namespace"] == namespace:
            return DiscoveryTopic(kind, params[param])
        params = bare.match(topic)
        if params is not None and params["namespace"] == namespace:
            return DiscoveryTopic(kind, None)
    return None
