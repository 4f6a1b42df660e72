"""Topics of the agent mesh: build, validate, match and translate them.

Pure standard-library code with no I/O. The SAM helper names
(``get_agent_request_topic``, ``extract_task_id_from_topic``...) are kept so SAM
code ports directly; subscription helpers return MQTT filters, and
:func:`solace_to_mqtt` turns Solace subscriptions into exact MQTT equivalents.

Every error raised here is a :class:`TopicError`, itself a ``ValueError``.
"""

from __future__ import annotations

from .answers import ANSWER_TEMPLATES, answer_topic_problem, validate_answer_topic
from .builders import (
    A2A_BASE,
    AGENT_CARD_TOPIC,
    AGENT_CARDS_TOPIC,
    AGENT_INSTANCE_CARD_TOPIC,
    AGENT_INSTANCE_REQUEST_TOPIC,
    AGENT_REQUEST_TOPIC,
    AGENT_RESPONSE_TOPIC,
    AGENT_STATUS_TOPIC,
    CLIENT_RESPONSE_TOPIC,
    CLIENT_STATUS_TOPIC,
    GATEWAY_CARD_TOPIC,
    GATEWAY_CARDS_TOPIC,
    GATEWAY_RESPONSE_TOPIC,
    GATEWAY_STATUS_TOPIC,
    ROLLCALL_TOPIC,
    CardKind,
    DiscoveryTopic,
    get_a2a_base_topic,
    get_agent_discovery_topic,
    get_agent_instance_discovery_topic,
    get_agent_instance_request_topic,
    get_agent_request_topic,
    get_agent_response_subscription_topic,
    get_agent_response_topic,
    get_agent_status_subscription_topic,
    get_client_response_topic,
    get_client_status_subscription_topic,
    get_client_status_topic,
    get_discovery_rollcall_topic,
    get_discovery_subscription_topic,
    get_gateway_discovery_topic,
    get_gateway_response_subscription_topic,
    get_gateway_response_topic,
    get_gateway_status_subscription_topic,
    get_gateway_status_topic,
    get_peer_agent_status_topic,
    get_rollcall_topic,
    parse_discovery_topic,
    parse_instance_card_topic,
)
from .errors import (
    InvalidFilterError,
    InvalidIdentifierError,
    InvalidNamespaceError,
    InvalidTopicError,
    TemplateError,
    TopicError,
    UnsupportedWildcardError,
)
from .matching import shared_subscription, split_shared_subscription, topic_matches
from .profile import (
    PROFILE_PREFIX,
    parse_profile_discovery_topic,
    profile_client_id,
    profile_discovery_filter,
    profile_discovery_topic,
    profile_pool_subscription,
    profile_pool_topic,
    profile_reply_topic,
    profile_reply_topic_problem,
    profile_request_topic,
    profile_share_group,
    validate_profile_id,
)
from .solace import extract_task_id_from_topic, solace_to_mqtt
from .templates import TopicTemplate
from .validation import (
    MAX_TOPIC_BYTES,
    validate_filter,
    validate_identifier,
    validate_namespace,
    validate_publish_topic,
    validate_share_group,
)

__all__ = [
    # builders: templates and parsing
    "A2A_BASE",
    "AGENT_CARDS_TOPIC",
    "AGENT_CARD_TOPIC",
    "AGENT_INSTANCE_CARD_TOPIC",
    "AGENT_INSTANCE_REQUEST_TOPIC",
    "AGENT_REQUEST_TOPIC",
    "AGENT_RESPONSE_TOPIC",
    "AGENT_STATUS_TOPIC",
    # answer topics
    "ANSWER_TEMPLATES",
    "CLIENT_RESPONSE_TOPIC",
    "CLIENT_STATUS_TOPIC",
    "GATEWAY_CARDS_TOPIC",
    "GATEWAY_CARD_TOPIC",
    "GATEWAY_RESPONSE_TOPIC",
    "GATEWAY_STATUS_TOPIC",
    # validation
    "MAX_TOPIC_BYTES",
    # the EMQX "A2A over MQTT" profile's topics
    "PROFILE_PREFIX",
    "ROLLCALL_TOPIC",
    "CardKind",
    "DiscoveryTopic",
    # errors
    "InvalidFilterError",
    "InvalidIdentifierError",
    "InvalidNamespaceError",
    "InvalidTopicError",
    "TemplateError",
    "TopicError",
    "TopicTemplate",
    "UnsupportedWildcardError",
    "answer_topic_problem",
    "extract_task_id_from_topic",
    # builders: SAM helper names
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
    "get_discovery_rollcall_topic",
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
    "parse_profile_discovery_topic",
    "profile_client_id",
    "profile_discovery_filter",
    "profile_discovery_topic",
    "profile_pool_subscription",
    "profile_pool_topic",
    "profile_reply_topic",
    "profile_reply_topic_problem",
    "profile_request_topic",
    "profile_share_group",
    # matching and Solace
    "shared_subscription",
    "solace_to_mqtt",
    "split_shared_subscription",
    "topic_matches",
    "validate_answer_topic",
    "validate_filter",
    "validate_identifier",
    "validate_namespace",
    "validate_profile_id",
    "validate_publish_topic",
    "validate_share_group",
]
