"""The transport seam and its implementations; the only code in the project that imports paho-mqtt.

- :mod:`mesh.transport.base`: the :class:`Transport` protocol components depend on, and the
  message types it carries (no paho);
- :mod:`mesh.transport.client`: :class:`MqttTransport`, paho driven by the asyncio loop
  (with :mod:`~mesh.transport.connection`, :mod:`~mesh.transport.publishing`,
  :mod:`~mesh.transport.inbound`, :mod:`~mesh.transport.pahoclient`, :mod:`~mesh.transport.codec`);
- :mod:`mesh.transport.memory`: :class:`MemoryBroker` and :class:`MemoryTransport`, an
  in-process hub for unit tests (see :mod:`agents.testing`).

Importing it changes nothing in paho: the faster properties codec is used by our own clients only.
"""

from mesh.transport.base import InboundMessage, MessageHandler, Subscription, Transport, Will, connect_subscribing
from mesh.transport.capabilities import BrokerCapabilities, UnsupportedByBrokerError
from mesh.transport.client import MqttTransport
from mesh.transport.memory import MemoryBroker, MemoryTransport

__all__ = [
    "BrokerCapabilities",
    "InboundMessage",
    "MemoryBroker",
    "MemoryTransport",
    "MessageHandler",
    "MqttTransport",
    "Subscription",
    "Transport",
    "UnsupportedByBrokerError",
    "Will",
    "connect_subscribing",
]
