"""An agent's connection to the broker, and the check that its name is free before it connects.

One instance per name (replicas aside): its MQTT session, hence what the broker redelivers to
it after a restart, follows the name, under a client id derived from the namespace and name
(or bound to its broker user on a secured mesh, :mod:`mesh.clientids`). A replica holds a slot
of the agent's user where the rules give it some, and a session that ends with it.
"""

from __future__ import annotations

import dataclasses
import logging

from agents.settings import AgentSettings
from mesh.broker import BrokerSettings
from mesh.clientids import REFUSED_USER, Claimed, own_client_id, replica_connection
from mesh.config.credentials import PROBE_ROLE, private_client_id, probe_client_id, role_user
from mesh.discovery.ownership import check_agent_name, ensure_agent_name_free
from mesh.discovery.presence import presence_will
from mesh.errors import ConnectError
from mesh.transport import MqttTransport, Transport
from topics import get_agent_discovery_topic, get_agent_instance_discovery_topic

__all__ = ["agent_transport", "check_name"]

log = logging.getLogger(__name__)


def agent_transport(
    broker: BrokerSettings,
    namespace: str,
    name: str,
    *,
    instance: str,
    settings: AgentSettings,
    client_id: str | None = None,
) -> tuple[Transport, int | None]:
    """The agent's connection and, for a replica holding one, its slot of the agent's user."""
    replica = settings.shared_subscription
    will_topic = get_agent_discovery_topic(namespace, name)
    if replica:  # its will clears its instance card; the shared card stays for the others
        will_topic = get_agent_instance_discovery_topic(namespace, name, instance)
    connect_as = dataclasses.replace(broker, session_expiry_s=0) if replica else broker
    own_id = client_id or private_client_id(f"{namespace}/{instance}", broker.password)
    # A replica takes a slot of the agent's user where the rules give it some: a broker user and
    # client id of its own while it runs, the one $MESH_REPLICA_SLOT names or a free one of this
    # machine (mesh.clientids).
    claimed = Claimed(connect_as, own_id)
    slot: int | None = None
    if replica and client_id is None and broker.username == name and broker.password:
        agent_id = own_client_id("agent", namespace, name, broker.password)
        claimed = replica_connection(connect_as, agent_id, own_id)
        slot = claimed.slot
    transport = claimed.transport(
        will=presence_will(will_topic),
        # Requests wait for the task store before their PUBACK: this bounds how many (and so
        # how many bytes) the agent holds meanwhile.
        receive_maximum=settings.max_unacked_requests,
    )
    return transport, slot


async def check_name(broker: BrokerSettings, namespace: str, name: str, client_id: str, timeout_s: float) -> None:
    """That no live instance serves ``name``: as the agent's ``{name}@probe`` user where its own
    user may connect under its own client id only (mesh.brokertools.brokerrules); as its own
    user under a client id of its own where the broker knows no such user (rules of an older
    version, another broker)."""
    if broker.username and broker.password:
        probe = MqttTransport(
            dataclasses.replace(broker, username=role_user(broker.username, PROBE_ROLE), session_expiry_s=0),
            client_id=probe_client_id(client_id),
        )
        try:
            await ensure_agent_name_free(probe, namespace, name, timeout_s=timeout_s)
            return
        except ConnectError as exc:
            if exc.reason_code not in REFUSED_USER:
                raise
            log.debug("agent %s: no name-check user on the broker (%s); checking as itself", name, exc)
    # A broker identity shared by the agents (or none): one probe for all the agents of this
    # process that start together (mesh.discovery.ownership).
    await check_agent_name(broker, namespace, name, timeout_s=timeout_s)
