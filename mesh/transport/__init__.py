"""The MQTT v5 transport: the only code in the project that imports paho-mqtt.

- :mod:`mesh.transport.base`: the :class:`Transport` seam components depend on, and the
  message types it carries (no paho);
- :mod:`mesh.transport.client`: :class:`MqttTransport`, paho driven by the asyncio loop;
- :mod:`mesh.transport.codec`: a faster drop-in for paho's ``Properties`` and the
  :class:`~mesh.properties.MessageProperties` conversion;
- :mod:`mesh.transport.window`: the bound on unacknowledged QoS 1 publishes.
"""

from mesh.transport import codec
from mesh.transport.base import InboundMessage, MessageHandler, Subscription, Transport, Will
from mesh.transport.client import MqttTransport

codec.install()

__all__ = ["InboundMessage", "MessageHandler", "MqttTransport", "Subscription", "Transport", "Will"]
