"""The dashboard's eyes on the mesh: the shared registry, plus requests and answers as they pass.

:class:`MeshWatcher` feeds a :class:`~gateways.dashboard.model.MeshView`:

- cards from the process's shared discovery registry (:func:`mesh.discovery.lease_registry`;
  with credentials, a registry on its own connection), replicas from its instance cards;
- requests on ``{ns}/a2a/v1/agent/request/{agent}``, subscribed per agent while its card is
  there and never with a wildcard: a request to an agent that is not on the mesh must still
  find no subscriber, so its caller learns at once that nobody listens (PUBACK 0x10, DESIGN
  "Delivery guarantees");
- answers on the six answer families (``agent|gateway|client`` x ``response|status``).

Its connection keeps no session and has no will: it owns no card and needs no queue. With
credentials it connects as a user bound to its client id (:mod:`mesh.clientids`): a gateway's
dashboard as ``{gateway}@watch``, ``mesh dashboard`` in a slot of the CLI user. Under
least-privilege broker rules (:mod:`mesh.brokertools.brokerrules`) a user may read only its own answers:
a refused subscription is logged and reported in :attr:`MeshWatcher.blind_spots` (the page
says what it cannot see), never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from gateways.dashboard.model import MeshView
from mesh.background import BackgroundTasks
from mesh.broker import BrokerSettings
from mesh.clientids import client_transport, connect_as_role, own_client_id
from mesh.discovery import RegistryLease, lease_registry
from mesh.discovery.registry import DiscoveryRegistry, RegistryEvent
from mesh.errors import MeshError
from mesh.transport import InboundMessage, MqttTransport, Subscription, Transport
from topics import ANSWER_TEMPLATES, TopicTemplate, get_agent_request_topic

if TYPE_CHECKING:
    from mesh.trust import CardVerifier

__all__ = ["MeshWatcher"]

log = logging.getLogger(__name__)

MessageHandlerType = Callable[[InboundMessage], None]


class MeshWatcher:
    """Keeps a :class:`MeshView` in step with one namespace (start, then stop)."""

    def __init__(
        self,
        view: MeshView,
        broker: BrokerSettings,
        namespace: str,
        *,
        owner: str = "dashboard",
        verifier: CardVerifier | None = None,
    ) -> None:
        self.view = view
        self.broker = broker
        self.namespace = namespace
        self.owner = owner
        self.verifier = verifier
        self._settings = dataclasses.replace(broker, session_expiry_s=0)
        self._random_id = f"{namespace}/{owner}-watch-{uuid.uuid4().hex[:8]}"
        self.transport: Transport = MqttTransport(self._settings, client_id=self._random_id)
        self._lease: RegistryLease | None = None
        self._own_registry: DiscoveryRegistry | None = None  # with credentials: on its own connection
        self._requests: dict[str, _Following] = {}  # agent -> its request subscription
        self._answers: list[Subscription] = []
        self._background = BackgroundTasks(log, "dashboard watcher")
        #: Topic filters the broker refused, with why: what the dashboard cannot see.
        self.blind_spots: dict[str, str] = {}

    async def _connect(self) -> None:
        """With credentials, a user bound to one client id (mesh.clientids): a gateway's dashboard its
        ``{gateway}@watch`` user, ``mesh dashboard`` a slot of the CLI user."""
        settings = self._settings
        if not settings.password or not settings.username:
            await self.transport.connect()
        elif settings.username == self.owner:
            own = own_client_id("gateway", self.namespace, self.owner, settings.password)
            self.transport = await connect_as_role(settings, "watch", own, self._random_id)
        else:
            self.transport = client_transport(settings)
            await self.transport.connect()

    async def start(self) -> None:
        await self._connect()
        for template in ANSWER_TEMPLATES:
            answers = template.filter(namespace=self.namespace)
            subscription = await self._subscribe(answers, self._answer_handler(template))
            if subscription is not None:
                self._answers.append(subscription)
        source: RegistryLease | DiscoveryRegistry
        if self.broker.password:  # another connection of this user would need a client id of its own
            source = self._own_registry = DiscoveryRegistry(self.transport, self.namespace, verifier=self.verifier)
            await source.start()
        else:
            source = self._lease = await lease_registry(
                self.broker, self.namespace, owner=self.owner, verifier=self.verifier
            )
        registry = source if isinstance(source, DiscoveryRegistry) else source.registry
        source.add_listener(self._on_registry_event)
        source.add_instance_listener(self._on_instance)
        source.add_refusal_listener(self.view.card_refused)
        for name, (kind, why) in list(registry.refused.items()):
            self.view.card_refused(name, kind, why)
        following = []
        for entry in [*registry.agents(), *registry.gateways()]:
            self.view.card_seen(entry, len(registry.instances(entry.name)))
            if entry.kind == "agent":
                following.append(self._follow_requests(entry.name))
        await asyncio.gather(*(task for task in following if task is not None))  # the SUBACKs

    async def stop(self) -> None:
        for task in list(self._background):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, MeshError):
                await task
        if self._lease is not None:
            await self._lease.release()
            self._lease = None
        if self._own_registry is not None:
            await self._own_registry.stop()
            self._own_registry = None
        await self.transport.close()
        self._requests.clear()
        self._answers.clear()

    @property
    def registry(self) -> DiscoveryRegistry | None:
        if self._own_registry is not None:
            return self._own_registry
        return None if self._lease is None else self._lease.registry

    # ------------------------------------------------------------------ cards

    def _on_registry_event(self, event: RegistryEvent) -> None:
        registry = self.registry
        if event.type == "removed":
            self.view.card_gone(event.kind, event.name)
            if event.kind == "agent":
                self._unfollow_requests(event.name)
            return
        entry = registry.get(event.name, event.kind) if registry is not None else None
        if entry is None:
            return
        self.view.card_seen(entry, len(registry.instances(entry.name)) if registry is not None else 0)
        if event.kind == "agent":
            self._follow_requests(event.name)

    def _on_instance(self, agent: str, instance: str, present: bool) -> None:
        registry = self.registry
        entry = registry.get(agent) if registry is not None else None
        if entry is not None and registry is not None:
            self.view.card_seen(entry, len(registry.instances(agent)))

    # ------------------------------------------------------------------ requests

    def _follow_requests(self, agent: str) -> asyncio.Task[None] | None:
        """Subscribe to ``agent``'s requests (in the background: the task, if a new subscription)."""
        if agent in self._requests:
            return None
        following = self._requests[agent] = _Following()
        topic = get_agent_request_topic(self.namespace, agent)

        def on_request(message: InboundMessage) -> None:
            self._on_request(agent, message)

        async def subscribe() -> None:
            subscription = await self._subscribe(topic, on_request)
            if subscription is None:
                return
            if self._requests.get(agent) is following:
                following.subscription = subscription
            elif self.transport.is_connected:  # its card left (and maybe came back) while we subscribed
                await self.transport.unsubscribe(subscription)

        return self._spawn(subscribe())

    def _unfollow_requests(self, agent: str) -> None:
        following = self._requests.pop(agent, None)
        subscription = following.subscription if following is not None else None
        if subscription is not None and self.transport.is_connected:
            self._spawn(self.transport.unsubscribe(subscription))

    def _on_request(self, agent: str, message: InboundMessage) -> None:
        props = message.properties
        key = _key(message)
        if key is None:
            return
        caller_kind = "client"
        reply_to = props.reply_to or ""
        for kind in ("agent", "gateway"):
            if f"/a2a/v1/{kind}/response/" in reply_to:
                caller_kind = kind
        self.view.request_seen(
            agent,
            key,
            message.payload,
            caller=props.client_id or "?",
            caller_kind=caller_kind,
            chain=props.call_chain or (),
            depth=props.call_depth or 0,
        )

    # ------------------------------------------------------------------ answers

    def _answer_handler(self, template: TopicTemplate) -> MessageHandlerType:
        final = "/response/" in template.pattern

        def on_answer(message: InboundMessage) -> None:
            key = _key(message)
            if key is not None:
                self.view.answer_seen(key, message.payload, final=final)

        return on_answer

    # ------------------------------------------------------------------ plumbing

    async def _subscribe(self, topic_filter: str, handler: MessageHandlerType) -> Subscription | None:
        try:
            return await self.transport.subscribe(topic_filter, handler)
        except MeshError as exc:
            self.blind_spots[topic_filter] = str(exc)
            log.warning("the dashboard cannot read %s: %s", topic_filter, exc)
            return None

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        return self._background.spawn(work)


class _Following:
    """One agent's request subscription: ``None`` until its SUBACK."""

    subscription: Subscription | None = None


def _key(message: InboundMessage) -> str | None:
    data = message.properties.correlation_data
    if not data:
        return None
    return data.decode("utf-8", "replace")
