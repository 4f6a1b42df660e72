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

Tasks are written through to a task journal (:mod:`agents.journal`; SQLite by default). A
request is acknowledged to the broker only once what it changed is stored, so the broker
redelivers a request whose agent died before that; the agent's MQTT session is persistent
under a client id derived from its namespace and name, so the restarted agent is the one
it redelivers to. On start, tasks the previous process left unfinished are failed with
"agent restarted" unless their request comes back within :data:`REDELIVERY_WINDOW_S`.
"""

from __future__ import annotations

import asyncio
import logging

from agents.admission import Admission
from agents.agent import Agent
from agents.answers import Answers
from agents.artifact_retention import ArtifactReaper, open_artifact_store
from agents.connection import agent_transport, check_name
from agents.delegation import Delegator
from agents.dispatch import RequestDispatcher, handler_table
from agents.guard import CallGuard
from agents.input_timers import InputTimers
from agents.journal import TaskJournal, load_together
from agents.journals import journal_where, open_error, open_journal
from agents.methods import AgentMethods
from agents.profile import ProfileEndpoint
from agents.push import PushConfigStore, PushNotifier
from agents.replicas import Siblings, new_instance_id
from agents.runner import TaskRunner
from agents.settings import AgentSettings
from agents.sharing import share_tasks
from agents.starting import starting_slot
from agents.streams import TaskStreams
from agents.tasks import ContextHistory, TaskRecord, TaskStore
from mesh.a2a import INTERRUPTED_STATES, AgentCard, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent, TextPart
from mesh.artifacts import ArtifactSettings, ArtifactStore
from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import ProfileScope
from mesh.errors import ConfigError
from mesh.member import MeshMember
from mesh.profile.emqx import DialectClaim, EmqxProfile, with_dialect_claim
from mesh.transport import InboundMessage, Subscription, Transport, connect_subscribing
from mesh.trust import Trust
from topics import (
    get_agent_discovery_topic,
    get_agent_request_topic,
    shared_subscription,
    validate_namespace,
)

__all__ = ["REDELIVERY_WINDOW_S", "AgentService"]

log = logging.getLogger(__name__)

# How long a stopping agent waits for the answers to its canceled tasks to go out.
_STOP_GRACE_S = 10.0
#: After a restart, how long the requests of unfinished tasks may take to come back (the broker
#: redelivers right after the session resumes) before those tasks fail as "agent restarted".
REDELIVERY_WINDOW_S = 2.0


class AgentService(MeshMember):
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
        journal: TaskJournal | None = None,
        trust: Trust | None = None,
        artifacts: ArtifactSettings | ArtifactStore | None = None,
    ) -> None:
        """Serve ``agent`` through ``transport``, or through an MQTT connection to ``broker``.

        A given transport must carry this agent's will (an empty retained message on its card
        topic), as the default one does. Tasks are kept in ``journal``, else where the
        ``task_store`` setting says. ``trust``: the agent signs its card with its key, its
        registry accepts only signed cards, and user tokens of trusted issuers are verified.
        ``artifacts``: the store (or its settings) of ``ctx.save_artifact``; by default
        ``MESH_ARTIFACTS`` or the embedded store, opened on first use (:mod:`mesh.artifacts`).
        """
        self.agent = agent
        self.name = agent.name
        namespace = validate_namespace(namespace)
        self.settings = settings or AgentSettings()
        self.artifacts = open_artifact_store(artifacts, namespace)
        self.guard = CallGuard.for_agent(self.name, namespace, self.settings, trust)
        self.request_topic = get_agent_request_topic(namespace, self.name)
        self.card_topic = get_agent_discovery_topic(namespace, self.name)
        replica = self.settings.shared_subscription
        instance = new_instance_id(self.name) if replica else self.name
        #: The replica's instance id (``None``: the one instance of the name; see agents.replicas).
        self.instance: str | None = instance if replica else None
        # The broker a start checks the name on (an injected transport: its owner's business).
        self._name_check_broker = broker if transport is None else None
        #: The slot a replica's connection holds (mesh.clientids); its profile connection takes it too.
        slot: int | None = None
        if transport is None:
            if broker is None:
                raise TypeError("AgentService needs a broker (BrokerSettings) or a transport")
            transport, slot = agent_transport(
                broker, namespace, self.name, instance=instance, settings=self.settings, client_id=client_id
            )
        self.url = f"{transport.url}/{self.request_topic}"
        self.siblings = Siblings(transport, namespace, self.name, instance) if replica else None
        #: The agent's endpoint in the EMQX profile (``emqx:`` set), on a connection of its own.
        self.profile: ProfileEndpoint | None = None
        # With a user bound to this connection's client id (a secured mesh: a password), a second
        # connection of its own would be refused: the registry then runs on this one. An injected
        # transport gets a registry of its own.
        shared = self._name_check_broker
        super().__init__(
            self.name,
            namespace,
            kind="agent",
            transport=transport,
            card_topic=self.card_topic,
            card=self._card,
            trust=trust,
            registry_owner=instance,
            registry_broker=shared if shared is not None and not shared.password else None,
            discovery_ttl_s=self.settings.discovery_ttl_s,
            heartbeat_topic=get_agent_discovery_topic(namespace) if self.settings.sam_heartbeat else None,
            heartbeat_interval_s=self.settings.card_interval_s,
            extra_card_topics=(self.siblings.card_topic,) if self.siblings is not None else (),
        )
        self._build_tasks(journal, instance)
        self._build_dispatch()
        if self.settings.emqx is not None:
            self.profile = self._profile_endpoint(self.settings.emqx, broker, slot)

    def _build_tasks(self, journal: TaskJournal | None, instance: str) -> None:
        """The task journal, the tasks and conversations it keeps, and what runs them."""
        if journal is None:  # the store the settings choose (agents.journals)
            journal = open_journal(self.settings, namespace=self.namespace, name=self.name, instance=instance)
        self.journal: TaskJournal = journal
        self.tasks = TaskStore(
            retention_s=self.settings.task_retention_s,
            max_finished=self.settings.max_retained_tasks,
            max_bytes=self.settings.max_retained_bytes,
            journal=self.journal,
        )
        self.artifact_reaper = ArtifactReaper(self.artifacts, self.name)
        self.tasks.on_forgotten = lambda record: self.artifact_reaper.forgotten(record.context_id, record.id)
        self.contexts = ContextHistory(per_context=self.settings.context_history_limit)
        self.push_configs = PushConfigStore(journal=self.journal)
        self.notifier = PushNotifier(
            allow_private=self.settings.allow_private_push_urls, timeout_s=self.settings.push_timeout_s
        )
        self.answers = Answers(self.transport, self.namespace, self.name, instance=self.instance)
        self.streams = TaskStreams(
            self.answers,
            tasks=self.tasks,
            contexts=self.contexts,
            push_configs=self.push_configs,
            notifier=self.notifier,
        )
        self.runner = TaskRunner(
            self.agent,
            self._on_event,
            max_concurrent=self.settings.max_concurrent_tasks,
            stall_timeout_s=self.settings.stall_timeout_s,
            metrics=self.metrics,
        )
        self.input_timers = InputTimers(self.settings.input_timeout_s, self.runner.cancel)
        self._orphans: list[TaskRecord] = []
        self._orphan_timer: asyncio.TimerHandle | None = None

    def _build_dispatch(self) -> None:
        """From a request to its method's handler: delegation, the methods, dispatch, admission."""
        self.delegator = Delegator(
            self.name,
            self.namespace,
            self.discovery,
            self.settings.delegation,
            calls=self.calls,
            profile=self.profile_requester,
        )
        self.methods = AgentMethods(
            self.agent,
            self.settings,
            tasks=self.tasks,
            contexts=self.contexts,
            push_configs=self.push_configs,
            runner=self.runner,
            streams=self.streams,
            answers=self.answers,
            delegator=self.delegator,
            guard=self.guard,
            artifacts=self.artifacts,
        )
        #: Replicas on a shared store: any answers for any task, a dead one's are taken over.
        self.takeover = share_tasks(self.journal, self.siblings, self.methods, self.settings, self.metrics)
        self.dispatcher = RequestDispatcher(
            self.name,
            handler_table(self.methods),
            self.answers,
            max_message_bytes=self.settings.limits.max_message_bytes,
            max_depth=self.settings.limits.max_nesting_depth,
            key_requests=self.journal.durable,
            max_waiting=self.settings.max_concurrent_tasks,
            guard=self.guard,
            metrics=self.metrics,
        )
        # At the concurrency bound requests wait, unacknowledged, in the broker's queue.
        self.admission = Admission(
            self.name,
            max_concurrent=self.settings.max_concurrent_tasks,
            receive_maximum=self.settings.max_unacked_requests,
            dispatch=self.dispatcher.on_request,
            refuse=self.dispatcher.on_request,
            acknowledge=self._acknowledge,
            at_capacity=lambda: self.runner.at_capacity,
            delegating=lambda: self.delegator.calls.open_calls > 0,
            pause=self.transport.pause_reading,
            resume=self.transport.resume_reading,
        )
        self.runner.on_place_free = self.admission.release
        self.transport.add_connect_listener(self._reconnected)

    def _profile_endpoint(self, emqx: EmqxProfile, broker: BrokerSettings | None, slot: int | None) -> ProfileEndpoint:
        if broker is None:
            raise ConfigError(
                f"agent {self.name!r} serves the EMQX profile (emqx:) and needs a broker for its second "
                "connection; pass broker= (BrokerSettings) too"
            )
        return ProfileEndpoint(
            emqx,
            agent_name=self.name,
            broker=broker,
            instance=self.instance,
            card=self.card_bytes,
            answers=self.answers,
            max_unacked_requests=self.settings.max_unacked_requests,
            members=self.siblings.others if self.siblings is not None else None,
            slot=slot,
        )

    @property
    def profile_scope(self) -> ProfileScope | None:
        """Where the agent serves the EMQX profile (for the broker rules), or ``None``."""
        return None if self.profile is None else self.profile.scope(replica=self.instance is not None)

    def _on_event(self, record: TaskRecord, event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        self.streams.on_event(record, event)
        self.input_timers.update(record)

    # ------------------------------------------------------------------ lifecycle

    def _card(self) -> AgentCard:
        """The agent's card, unsigned (the base signs each change once)."""
        card = self.agent.card(url=self.url, push_notifications=self.settings.push_notifications)
        if self.profile is not None:  # both dialects: one agent, one registry entry (mesh.discovery.registry)
            card = with_dialect_claim(
                card, DialectClaim(namespace=self.namespace, name=self.name, address=self.profile.address)
            )
        return card

    def card_bytes(self) -> bytes:
        """The card as published: signed when the agent has a key."""
        return self.card()

    async def start(self) -> None:
        """Check that no live instance serves the name (:class:`~mesh.errors.AgentNameTakenError`
        otherwise; replicas skip it), load the stored tasks, connect, subscribe to the request
        topic and announce the card."""
        self.agent.leave_mesh = self.stop
        if hasattr(self.agent, "announce"):  # an agent whose card comes and goes (agents.remote)
            self.agent.announce = self.announce
        if hasattr(self.agent, "task_store"):  # an agent keeping records beside its tasks (agents.llm's usage)
            self.agent.task_store = self.settings.store
        # Before our own connection exists: connecting under the owner's client id would take
        # its session over, and no will of ours can clear the live owner's card.
        timeout_s = self.settings.name_check_timeout_s
        if self._name_check_broker is not None and timeout_s is not None and not self.settings.shared_subscription:
            await check_name(self._name_check_broker, self.namespace, self.name, self.transport.client_id, timeout_s)
        await self._load_tasks()
        await self.agent.setup()
        filters = [self.request_topic]
        if self.siblings is not None:  # new tasks shared with the others, follow-ups of its own
            filters = [shared_subscription(self.name, self.request_topic), self.siblings.request_topic]
        try:
            async with starting_slot():
                subscriptions = await self._connect_and_announce(filters)
        except BaseException:
            # A clean DISCONNECT discards our will, which would clear a card we never published.
            await self.presence.rollcall.stop()  # no longer hears roll calls (mesh.discovery.rollcall)
            if self.profile is not None:
                await self.profile.transport.close()
            await self.discovery.close()
            await self.transport.close()
            await self.journal.close()
            raise
        self._subscriptions = subscriptions  # started: stop() has something to stop
        if self.takeover is not None:
            self.takeover.start()
        self.metrics.watch(in_flight=lambda: self.runner.running, discovery_size=lambda: len(self.registry.agents()))
        if self._orphans and self.agent.resumes_tasks:  # it picks them up itself
            # Not an orphan whose request the broker redelivered meanwhile: that one runs again
            # already, under the same id (AgentMethods._repeated); resuming it too would run it twice.
            self._orphans = [
                record
                for record in self._orphans
                if self.tasks.get(record.id) is record and not record.is_terminal and not self.methods.resume(record)
            ]
        if self._orphans:
            loop = asyncio.get_running_loop()
            self._orphan_timer = loop.call_later(REDELIVERY_WINDOW_S, self._fail_orphans)
        log.info("agent %s serving %s on %s", self.name, self.request_topic, self.transport.url)

    async def _connect_and_announce(self, filters: list[str]) -> list[Subscription]:
        self.metrics.watch_transport(self.transport)
        subscriptions = await connect_subscribing(self.transport, lambda: self._subscribe_requests(filters))
        if self.siblings is not None:
            await self.siblings.start()
        if self.agent.uses_discovery:
            await self.discovery.get()
        # The delegator subscribes to the agent's answer topics at its first sub-task (the call
        # path starts itself): most agents never delegate, and at a start of 1,000 agents the
        # two SUBSCRIBEs each were a third of the start's packets.
        await self.presence.start()
        if self.profile is not None:
            await self.profile.start(self._on_request, self.metrics)
        return subscriptions

    async def _subscribe_requests(self, filters: list[str]) -> list[Subscription]:
        return list(
            await asyncio.gather(*(self.transport.subscribe(f, self._on_request, manual_ack=True) for f in filters))
        )

    async def _load_tasks(self) -> None:
        # Every journal gets the same lifecycle: load, flow control, start (not only SQLite's).
        journal = self.journal
        try:
            loaded = await load_together(journal)  # one thread job for the agents starting together
        except Exception as exc:  # a pluggable store: whatever it raises, the start fails saying so
            raise open_error(self.name, journal, exc) from exc
        where = journal_where(journal)
        transport = self.transport
        journal.on_backlog(
            lambda: transport.pause_reading("task store"), lambda: transport.resume_reading("task store")
        )
        journal.start(asyncio.get_running_loop())
        self._orphans = self.tasks.restore(loaded)
        self.input_timers.restore(self.tasks.active())  # questions with a deadline of their own
        self.push_configs.restore(loaded.push_configs)
        for stored in loaded.tasks:  # the conversations, oldest first
            for message in stored.task.history or ():
                self.contexts.append(stored.task.context_id, message)
        if loaded.tasks:
            log.info(
                "agent %s: %d task(s) back from %s, %d of them unfinished",
                self.name,
                len(loaded.tasks),
                where,
                len(self._orphans),
            )

    def _on_request(self, message: InboundMessage) -> None:
        if self.dispatcher.on_request(message):
            self.admission.hold(message)  # at the bound: unacknowledged, it waits for a place
            return
        self._acknowledge(message)

    def _acknowledge(self, message: InboundMessage) -> None:
        # Acknowledged once what the request changed is stored; else the broker redelivers it.
        self.journal.after_durable(message.ack)

    def _reconnected(self, session_present: bool) -> None:
        if session_present and (dropped := self.admission.forget_redelivered()):
            log.info("agent %s: %d held request(s) come back from the broker's session", self.name, dropped)

    def _fail_orphans(self) -> None:
        """Fail the tasks the previous process left unfinished and whose request did not come back."""
        self._orphan_timer = None
        orphans, self._orphans = self._orphans, []
        failed = 0
        for record in orphans:
            if record.is_terminal or self.tasks.get(record.id) is not record:
                continue  # its request came back and it ran again
            text = f"agent {self.name!r} restarted while the task was {record.state.value}; send it again"
            self.runner.transition(record, TaskState.failed, [TextPart(text=text)])
            failed += 1
        if failed:
            log.warning("agent %s: %d task(s) left unfinished by the previous process failed", self.name, failed)

    async def stop(self) -> None:
        """Stop taking requests, cancel and answer in-flight tasks, clear the card, disconnect."""
        if self.dispatcher.stopping or not hasattr(self, "_subscriptions"):  # stopped, or never started
            return
        self.dispatcher.stopping = True
        for subscription in self._subscriptions:
            await self.transport.unsubscribe(subscription)
        self.admission.close()
        self.runner.on_place_free = None  # the tasks canceled below free places nobody takes
        if self.siblings is not None:  # its session ends with it: the callers' retry finds another replica
            self.admission.refuse_all("is shutting down")
        # Else held requests stay unacknowledged: the broker redelivers them to the next start.
        if self.profile is not None:
            await self.profile.unsubscribe()
        # A task waiting for its user's answer stays so in the store: the answer, sent after a
        # restart, runs the handler again with it (agents.runner). Only running tasks are canceled.
        active = [r for r in self.tasks.active() if r.state not in INTERRUPTED_STATES]
        await asyncio.gather(*(self.runner.cancel(r, "the agent is shutting down") for r in active))
        if self._orphan_timer is not None:
            self._orphan_timer.cancel()
        if self.takeover is not None:
            await self.takeover.stop()
        await self.runner.wait_idle(_STOP_GRACE_S)
        await self.dispatcher.drain(_STOP_GRACE_S)
        await self.journal.close()  # stores the last changes and lets their answers go
        await self.answers.drain(_STOP_GRACE_S)  # the answers to the canceled tasks: let them land
        if self.profile is not None:
            await self.profile.close()  # its card offline, after its answers
        # A replica clears the shared card only if it is the last one (agents.replicas).
        keep = (self.card_topic,) if self.siblings is not None and self.siblings.others() else ()
        await self.presence.stop(keep=keep)
        if self.siblings is not None:
            await self.siblings.stop()
        await self.discovery.close()
        await self.notifier.aclose()
        await self.transport.close()
        self.metrics.unwatch()
        await self.agent.teardown()
        await self.artifact_reaper.idle()
        await self.artifacts.close()
        log.info("agent %s stopped (%d running task(s) canceled)", self.name, len(active))
