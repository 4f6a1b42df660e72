"""An agent as a broker-connected service: lifecycle and wiring of its runtime.

Requests arrive on ``{ns}/a2a/v1/agent/request/{agent}``. The runtime is split by concept:

- :mod:`agents.dispatch`: each request to the handler of its method, errors to answers;
- :mod:`agents.methods`: the nine A2A methods;
- :mod:`agents.runner`: the agent's handler, from a message to events;
- :mod:`agents.streams`: each event to the task's streams, waiting requests, push, retention;
- :mod:`agents.input_timers`: tasks left input-required too long are canceled;
- :mod:`agents.answers`: where answers go, and sending them.

Requests are handled synchronously in the transport's callback, and answers are handed to
the transport in order with ``publish_nowait``: a blocking ``message/send`` registers a
callback that publishes the Task when it settles, rather than a coroutine waiting for it.
Only methods that must wait (cancel, push-URL checks) run as tasks.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from agents.agent import Agent
from agents.answers import Answers
from agents.delegation import Delegator
from agents.dispatch import RequestDispatcher, handler_table
from agents.input_timers import InputTimers
from agents.methods import AgentMethods
from agents.push import PushConfigStore, PushNotifier
from agents.runner import TaskRunner
from agents.settings import AgentSettings
from agents.streams import TaskStreams
from agents.tasks import ContextHistory, TaskRecord, TaskStore
from mesh.a2a import TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from mesh.broker import BrokerSettings
from mesh.ownership import ensure_agent_name_free
from mesh.presence import CardPresence, presence_will
from mesh.registry import DiscoveryRegistry
from mesh.transport import MqttTransport, Transport
from topics import get_agent_discovery_topic, get_agent_request_topic, shared_subscription, validate_namespace

__all__ = ["AgentService"]

log = logging.getLogger(__name__)

# How long a stopping agent waits for the answers to its canceled tasks to go out.
_STOP_GRACE_S = 10.0


class AgentService:
    """Serves one :class:`~agents.agent.Agent` on the mesh (a :class:`mesh.component.Component`)."""

    kind = "agent"

    def __init__(
        self,
        agent: Agent,
        *,
        namespace: str,
        broker: BrokerSettings | None = None,
        settings: AgentSettings | None = None,
        client_id: str | None = None,
        transport: Transport | None = None,
    ) -> None:
        """Serve ``agent`` through ``transport``, or through an MQTT connection to ``broker``.

        A given transport must carry this agent's will (an empty retained message on its card
        topic), as the default one does.
        """
        self.agent = agent
        self.name = agent.name
        self.namespace = validate_namespace(namespace)
        self.settings = settings or AgentSettings()
        self.request_topic = get_agent_request_topic(self.namespace, self.name)
        self.card_topic = get_agent_discovery_topic(self.namespace, self.name)
        # The broker a start checks the name on (an injected transport: its owner's business).
        self._name_check_broker = broker if transport is None else None
        if transport is None:
            if broker is None:
                raise TypeError("AgentService needs a broker (BrokerSettings) or a transport")
            transport = MqttTransport(
                broker,
                client_id=client_id or f"{self.name}-{uuid.uuid4().hex[:8]}",
                will=presence_will(self.card_topic),
            )
        self.transport: Transport = transport
        self.url = f"{transport.url}/{self.request_topic}"
        self.tasks = TaskStore(
            retention_s=self.settings.task_retention_s,
            max_finished=self.settings.max_retained_tasks,
            max_bytes=self.settings.max_retained_bytes,
        )
        self.contexts = ContextHistory(per_context=self.settings.context_history_limit)
        self.push_configs = PushConfigStore()
        self.notifier = PushNotifier(
            allow_private=self.settings.allow_private_push_urls, timeout_s=self.settings.push_timeout_s
        )
        self.answers = Answers(self.transport, self.namespace, self.name)
        self.streams = TaskStreams(
            self.answers,
            tasks=self.tasks,
            contexts=self.contexts,
            push_configs=self.push_configs,
            notifier=self.notifier,
        )
        self.runner = TaskRunner(
            agent,
            self._on_event,
            max_concurrent=self.settings.max_concurrent_tasks,
            stall_timeout_s=self.settings.stall_timeout_s,
        )
        self.input_timers = InputTimers(self.settings.input_timeout_s, self.runner.cancel)
        self.registry = DiscoveryRegistry(self.transport, self.namespace, ttl_s=self.settings.discovery_ttl_s)
        self.delegator = Delegator(self.name, self.namespace, self.transport, self.registry, self.settings.delegation)
        self.presence = CardPresence(
            self.transport,
            self.card_topic,
            self.card_bytes,
            interval_s=self.settings.card_interval_s,
            expiry_intervals=self.settings.card_expiry_intervals,
        )
        self.methods = AgentMethods(
            agent,
            self.settings,
            tasks=self.tasks,
            contexts=self.contexts,
            push_configs=self.push_configs,
            runner=self.runner,
            streams=self.streams,
            answers=self.answers,
            delegator=self.delegator,
        )
        self.dispatcher = RequestDispatcher(
            self.name,
            handler_table(self.methods),
            self.answers,
            max_message_bytes=self.settings.limits.max_message_bytes,
            max_depth=self.settings.limits.max_nesting_depth,
        )

    def _on_event(self, record: TaskRecord, event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        self.streams.on_event(record, event)
        self.input_timers.update(record)

    # ------------------------------------------------------------------ lifecycle

    def card_bytes(self) -> bytes:
        return self.agent.card(url=self.url, push_notifications=self.settings.push_notifications).to_json_bytes()

    async def start(self) -> None:
        """Check that no live instance serves the name (:class:`~mesh.errors.AgentNameTakenError`
        otherwise; replicas skip it), connect, subscribe to the request topic and announce the card."""
        self.agent.leave_mesh = self.stop
        # Before our own connection exists: no will of ours can clear the live owner's card.
        timeout_s = self.settings.name_check_timeout_s
        if self._name_check_broker is not None and timeout_s is not None and not self.settings.shared_subscription:
            await ensure_agent_name_free(
                MqttTransport(self._name_check_broker), self.namespace, self.name, timeout_s=timeout_s
            )
        await self.agent.setup()
        try:
            await self.transport.connect()
            await self.registry.start()
            await self.delegator.start()
            topic_filter = self.request_topic
            if self.settings.shared_subscription:
                topic_filter = shared_subscription(self.name, self.request_topic)
            subscription = await self.transport.subscribe(topic_filter, self.dispatcher.on_request)
            await self.presence.start()
        except BaseException:
            # A clean DISCONNECT discards our will, which would clear a card we never published.
            await self.transport.close()
            raise
        self._subscription = subscription  # started: stop() has something to stop
        log.info("agent %s serving %s on %s", self.name, self.request_topic, self.transport.url)

    async def stop(self) -> None:
        """Stop taking requests, cancel and answer in-flight tasks, clear the card, disconnect."""
        if self.dispatcher.stopping or not hasattr(self, "_subscription"):  # stopped, or never started
            return
        self.dispatcher.stopping = True
        await self.transport.unsubscribe(self._subscription)
        active = list(self.tasks.active())
        await asyncio.gather(*(self.runner.cancel(r, "the agent is shutting down") for r in active))
        await self.runner.wait_idle(_STOP_GRACE_S)
        await self.dispatcher.drain(_STOP_GRACE_S)
        await self.answers.drain(_STOP_GRACE_S)  # the answers to the canceled tasks: let them land
        await self.presence.stop()
        await self.registry.stop()
        await self.notifier.aclose()
        await self.transport.close()
        await self.agent.teardown()
        log.info("agent %s stopped (%d task(s) canceled)", self.name, len(active))
