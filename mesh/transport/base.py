"""The transport seam: what mesh components need from a connection, with no paho in sight.

Services, clients, registries and gateways depend on :class:`Transport`; :class:`MqttTransport`
(:mod:`mesh.transport.client`) is the implementation on a real broker, and
:class:`~mesh.transport.memory.MemoryTransport` an in-process one for agent authors' unit
tests (see :mod:`agents.testing`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from mesh.properties import MessageProperties
from mesh.transport.capabilities import BrokerCapabilities

__all__ = [
    "ConnectListener",
    "DisconnectListener",
    "InboundMessage",
    "MessageHandler",
    "Subscription",
    "Transport",
    "Will",
    "connect_subscribing",
]


def _acknowledged() -> None:
    """The acknowledgement of a message the transport acknowledges itself: nothing to do."""


@dataclass(slots=True)
class InboundMessage:
    """A message received on a subscription.

    On a subscription made with ``manual_ack``, the handler acknowledges a QoS 1 message to
    the broker by calling :attr:`ack` (once it has done what must survive a crash); until then
    the broker redelivers it to the same session after a reconnect, with
    :attr:`redelivered` set. Elsewhere :attr:`ack` does nothing: the transport acknowledges.
    """

    topic: str
    payload: bytes
    qos: int
    retain: bool
    properties: MessageProperties
    redelivered: bool = False
    ack: Callable[[], None] = _acknowledged


@dataclass(frozen=True, slots=True)
class Will:
    """The message the broker publishes for us if the connection dies without DISCONNECT."""

    topic: str
    payload: bytes = b""
    qos: int = 1
    retain: bool = False
    properties: MessageProperties | None = None


MessageHandler = Callable[[InboundMessage], Awaitable[None] | None]
ConnectListener = Callable[[bool], Awaitable[None] | None]
DisconnectListener = Callable[[str], Awaitable[None] | None]


@dataclass(eq=False, frozen=True, slots=True)
class Subscription:
    """A handler's subscription; pass it to :meth:`Transport.unsubscribe` to end it."""

    topic_filter: str
    handler: MessageHandler


@runtime_checkable
class Transport(Protocol):
    """One connection to the mesh's broker, used from asyncio.

    Handlers and listeners may be plain functions (called on the loop; keep them short) or
    coroutine functions (run as tasks, off the network path). Their exceptions are logged,
    never propagated into the transport.
    """

    @property
    def client_id(self) -> str: ...

    @property
    def url(self) -> str:
        """Where the connection goes, for logs and cards (no password)."""
        ...

    @property
    def is_connected(self) -> bool:
        """Connected, with every subscription acknowledged by the broker's current session."""
        ...

    @property
    def capabilities(self) -> BrokerCapabilities:
        """What the broker said in its CONNACK it can do (a full broker's until connected)."""
        ...

    async def connect(self) -> None:
        """Connect once (then reconnect by itself until :meth:`close`); raise ``ConnectError``."""

    async def close(self) -> None:
        """Disconnect cleanly (no will fires) and fail whatever is still pending."""

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until connected (subscriptions acknowledged); raise ``NotConnectedError`` after ``timeout``."""

    async def publish(
        self,
        topic: str,
        payload: bytes | str,
        *,
        qos: int = 1,
        retain: bool = False,
        properties: MessageProperties | None = None,
        timeout: float | None = None,
    ) -> None:
        """Publish; for QoS 1 wait for the broker's acknowledgement (``PublishError`` on refusal)."""

    def publish_nowait(
        self,
        topic: str,
        payload: bytes | str,
        *,
        retain: bool = False,
        properties: MessageProperties | None = None,
        require_subscriber: bool = False,
    ) -> asyncio.Future[None]:
        """Queue a QoS 1 publish in call order; the future resolves on the acknowledgement.

        With ``require_subscriber`` it fails with :class:`~mesh.errors.NoSubscribersError` when
        no subscription matched the message (PUBACK 0x10): how a request learns nobody serves it.
        """
        ...

    async def subscribe(
        self,
        topic_filter: str,
        handler: MessageHandler,
        *,
        qos: int = 1,
        no_local: bool = False,
        manual_ack: bool = False,
        timeout: float | None = None,
    ) -> Subscription:
        """Subscribe and wait for the broker's acknowledgement; survives reconnects.

        With ``manual_ack`` the handler acknowledges each message with ``message.ack()``.
        """
        ...

    async def unsubscribe(self, subscription: Subscription) -> None:
        """Stop delivering to ``subscription``."""

    def pause_reading(self, reason: str) -> None:
        """Flow control: deliver no more messages until every ``reason`` given is lifted."""

    def resume_reading(self, reason: str) -> None:
        """Lift a :meth:`pause_reading`."""

    def add_connect_listener(self, listener: ConnectListener) -> None:
        """Call ``listener(session_present)`` after every (re)connection, once its subscriptions are acknowledged."""

    def add_disconnect_listener(self, listener: DisconnectListener) -> None:
        """Call ``listener(reason)`` whenever an established connection is lost."""


_T = TypeVar("_T")


async def connect_subscribing(transport: Transport, subscribe: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Connect ``transport`` with ``subscribe``'s handlers already in place (subscribing before
    the connect exists is allowed), so what a resumed session redelivers right after the CONNACK
    finds them; what ``subscribe`` returned, once the broker acknowledged it."""
    subscribing: asyncio.Task[_T] = asyncio.get_running_loop().create_task(subscribe())
    await asyncio.sleep(0)  # its handlers registered before the CONNACK can arrive
    try:
        await transport.connect()
    except BaseException:
        subscribing.cancel()
        raise
    return await subscribing
