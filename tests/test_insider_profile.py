"""Issue 39, item 2: a replica's EMQX-profile user reached every agent of its org/unit.

With its own credentials file (``credentials/prep@a2a``), a replica serving the profile could
connect under any client id, subscribe another agent's ``$a2a/v1/request/...`` topic (and receive
its requests), clear that agent's retained profile card (which stayed gone) and publish a forged
one: its rules granted ``$a2a/v1/{request,discovery,event}/{org}/{unit}/+``. Now a replica's
profile connection is a slot of the profile user, like its own connection (the replica in slot
``k`` is the profile's agent ``prep-k``, user ``prep@a2a@k``, bound to ``{org}/{unit}/prep-k``),
with that member's topics and the pool's alone; and the profile card heals like the SAM card.

Each attack runs on a real Mosquitto under the generated rules; the heal on the open test broker,
where anyone may publish on any card topic.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from agents.service import AgentService
from agents.settings import AgentSettings
from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import Identity, ProfileScope, profile_user
from mesh.brokertools.localbroker import LocalBroker
from mesh.client import MeshClient
from mesh.config.credentials import password_for
from mesh.errors import ConnectError, NotAuthorizedError, SubscribeError
from mesh.profile.emqx import STATUS, STATUS_SOURCE, EmqxProfile
from mesh.properties import MessageProperties
from mesh.telemetry import METRICS
from mesh.transport import InboundMessage, MqttTransport
from tests.agents.service_agents import Echo
from tests.support import Inbox, round_trip, within
from tests.test_broker_rules import RuledBroker, broker_under_rules

UNIT = "lab"


class Pecho(Echo):
    name = "pecho"


class Prep(Echo):
    name = "prep"


@pytest.fixture
def org() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def lab(make_broker: Callable[..., LocalBroker], broker_dir: Path, namespace: str, org: str) -> Iterator[RuledBroker]:
    """The rules for ``prep`` (replicas serving the profile), ``pecho`` (one agent serving it),
    ``calculator`` (an agent calling it) and the CLI user."""
    identities = [
        Identity("agent", "prep", namespace, profile=ProfileScope(org, UNIT, "prep", "prep", True), replica=True),
        Identity("agent", "pecho", namespace, profile=ProfileScope(org, UNIT, "pecho")),
        Identity("agent", "calculator", namespace),
        Identity("client", "cli", namespace),
    ]
    with broker_under_rules(make_broker, broker_dir, namespace, identities) as ruled:
        yield ruled


def profile_settings(ruled: RuledBroker, agent: str, username: str | None = None) -> BrokerSettings:
    """Connect as ``agent``'s profile user (or ``username``, one of its slots): the password of ``{agent}@a2a``."""
    user = profile_user(agent)
    password = password_for(ruled.files.passwords, user)
    return BrokerSettings.from_url(ruled.broker.url, username=username or user, password=password)


def emqx_settings(org: str, **settings: object) -> AgentSettings:
    return AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit=UNIT), **settings)  # type: ignore[arg-type]


@pytest.fixture
async def pecho(lab: RuledBroker, org: str) -> AsyncIterator[AgentService]:
    service = AgentService(Pecho(), namespace=lab.namespace, broker=lab.settings("pecho"), settings=emqx_settings(org))
    await service.start()
    try:
        assert service.profile is not None and service.profile.transport.client_id == f"{org}/{UNIT}/pecho"
        yield service
    finally:
        await service.stop()


def card_topic(org: str, agent: str) -> str:
    return f"$a2a/v1/discovery/{org}/{UNIT}/{agent}"


async def retained_card(settings: BrokerSettings, client_id: str | None, topic: str) -> InboundMessage:
    """What a newcomer gets on ``topic`` now."""
    async with MqttTransport(settings, client_id=client_id) as late:
        retained = Inbox()
        await late.subscribe(topic, retained)
        [card] = await retained.wait_for(1)
        return card


async def test_a_replicas_profile_user_cannot_read_another_agents_requests(
    lab: RuledBroker, pecho: AgentService, org: str
) -> None:
    """(a) prep's profile user subscribes pecho's request topic (and any agent's, and pecho's as a
    shared subscription): the broker refuses each (SUBACK 0x87), and calculator's request to
    pecho reaches pecho alone."""
    requests = f"$a2a/v1/request/{org}/{UNIT}"
    stolen = Inbox()
    async with MqttTransport(profile_settings(lab, "prep"), client_id=f"{org}/{UNIT}/prep-0") as attacker:
        for topic_filter in (f"{requests}/pecho", f"{requests}/+", f"$share/g/{requests}/pecho"):
            with pytest.raises(SubscribeError, match="Not authorized"):
                await attacker.subscribe(topic_filter, stolen)
        # calculator calls pecho in the profile; pecho answers; the attacker got nothing.
        calculator = lab.settings("calculator")
        async with MqttTransport(calculator, client_id=lab.client_id("calculator")) as caller:
            replies = Inbox()
            reply_topic = f"$a2a/v1/reply/{org}/{UNIT}/calculator/r1"
            await caller.subscribe(reply_topic, replies)
            request = {
                "jsonrpc": "2.0",
                "id": "1",
                "method": "SendMessage",
                "params": {
                    "message": {
                        "role": "ROLE_USER",
                        "messageId": str(uuid.uuid4()),
                        "taskId": str(uuid.uuid4()),
                        "parts": [{"text": "for pecho only"}],
                    }
                },
            }
            props = MessageProperties(reply_to=reply_topic, correlation_data=b"c1")
            await caller.publish(f"{requests}/pecho", json.dumps(request).encode(), properties=props)
            [reply] = await replies.wait_for(1, timeout=10)
            assert "for pecho only" in reply.payload.decode()
        # The request was routed before pecho had it, so before this round trip: none reached the attacker.
        await round_trip(attacker, card_topic(org, "prep-0"))
    assert stolen.messages == []


async def test_a_replicas_profile_user_cannot_clear_or_forge_another_agents_card(
    lab: RuledBroker, pecho: AgentService, org: str
) -> None:
    """(b, c) prep's profile user clears pecho's retained card, then publishes a forged one: the
    broker refuses both (PUBACK 0x87), and the card on the broker is still pecho's own."""
    topic = card_topic(org, "pecho")
    cli, cli_id = lab.settings("cli"), lab.client_id("cli")
    original = await retained_card(cli, cli_id, topic)
    assert original.properties.get_extra(STATUS) == "online"
    forged = json.dumps({"name": "pecho", "supportedInterfaces": [{"url": "mqtt://evil:1883"}]}).encode()
    async with MqttTransport(profile_settings(lab, "prep"), client_id=f"{org}/{UNIT}/prep-0") as attacker:
        for payload in (b"", forged):
            with pytest.raises(NotAuthorizedError):
                await attacker.publish(topic, payload, retain=True)
        with pytest.raises(NotAuthorizedError):  # nor its events
            await attacker.publish(f"$a2a/v1/event/{org}/{UNIT}/pecho", b"{}")
    now = await retained_card(cli, cli_id, topic)
    assert now.payload == original.payload and now.properties.get_extra(STATUS) == "online"


async def test_a_replicas_profile_user_connects_only_under_its_slots_client_id(
    lab: RuledBroker, pecho: AgentService, org: str
) -> None:
    """(d) prep's profile user connects under pecho's profile client id (a takeover of pecho's
    session), an id of its choosing, or another slot's: the broker refuses each (CONNACK 0x87),
    and pecho's profile connection is never touched."""
    assert pecho.profile is not None
    lost = asyncio.Event()
    pecho.profile.transport.add_disconnect_listener(lambda _reason: lost.set())
    slot0, slot1 = profile_settings(lab, "prep"), profile_settings(lab, "prep", "prep@a2a@1")
    attempts = [
        (slot0, f"{org}/{UNIT}/pecho"),
        (slot0, f"{org}/{UNIT}/impostor"),
        (slot0, f"{org}/{UNIT}/prep-1"),
        (slot1, f"{org}/{UNIT}/prep-0"),
        (slot1, f"{org}/{UNIT}/pecho"),
    ]
    for settings, client_id in attempts:
        with pytest.raises(ConnectError, match="Not authorized") as refused:
            await MqttTransport(settings, client_id=client_id).connect()
        assert refused.value.reason_code == 0x87, (settings.username, client_id)
    for settings, client_id in ((slot0, f"{org}/{UNIT}/prep-0"), (slot1, f"{org}/{UNIT}/prep-1")):
        async with MqttTransport(settings, client_id=client_id):  # its own slot's id: taken
            pass
    # A takeover's DISCONNECT would come before this round trip's SUBACK (or instead of it).
    await round_trip(pecho.profile.transport, f"$a2a/v1/event/{org}/{UNIT}/pecho", publish=True)
    assert not lost.is_set() and pecho.profile.transport.is_connected


async def test_replicas_serve_the_profile_each_in_a_slot_of_its_own(lab: RuledBroker, org: str) -> None:
    """Two replicas of prep: the first in slot 0 (``prep@a2a``, ``{org}/{unit}/prep-0``), the
    second in slot 1; both serve the pool, each answers on its own member topic."""
    settings = emqx_settings(org, shared_subscription=True)
    replicas: list[AgentService] = []
    try:
        for _ in range(2):
            replica = AgentService(Prep(), namespace=lab.namespace, broker=lab.settings("prep"), settings=settings)
            await replica.start()
            replicas.append(replica)
        profiles = [r.profile for r in replicas if r.profile is not None]
        users = sorted((p.transport.settings.username, p.transport.client_id) for p in profiles)  # type: ignore[attr-defined]
        assert users == [("prep@a2a", f"{org}/{UNIT}/prep-0"), ("prep@a2a@1", f"{org}/{UNIT}/prep-1")]
        assert sorted(p.agent_id for p in profiles) == ["prep-0", "prep-1"]
        async with asyncio.timeout(10):  # each knows the other (the pool's split)
            while any(r.siblings is None or not r.siblings.others() for r in replicas):
                await asyncio.sleep(0.01)
        async with MeshClient.connect(lab.settings("cli"), lab.namespace) as client:
            for target in ("pool/prep", "prep-0", "prep-1"):
                answer = await client.send(f"{org}/{UNIT}/{target}", f"to {target}", timeout=10)
                assert f"to {target}" in answer.model_dump_json()
    finally:
        for replica in reversed(replicas):
            await replica.stop()


async def test_a_cleared_forged_or_offline_profile_card_is_back_within_a_second(
    broker_settings: BrokerSettings, namespace: str, org: str
) -> None:
    """Someone who may publish on pecho's card topic clears it, forges it, marks it offline: each
    time pecho publishes its card again (online) within 1 s, counted like the SAM card's heal.
    Its own offline card at a clean stop is left alone, and the next start counts no heal."""
    topic = card_topic(org, "pecho")
    metrics = METRICS.component(namespace, "pecho")
    service = AgentService(Pecho(), namespace=namespace, broker=broker_settings, settings=emqx_settings(org))
    await service.start()
    try:
        before = metrics.cards_healed
        offline = MessageProperties(extra=[(STATUS, "offline"), (STATUS_SOURCE, "lwt")])
        async with (
            MqttTransport(broker_settings, client_id=f"watch-{uuid.uuid4().hex[:8]}") as watcher,
            MqttTransport(broker_settings, client_id=f"evil-{uuid.uuid4().hex[:8]}") as attacker,
        ):
            cards = Inbox()
            await watcher.subscribe(topic, cards)
            [original] = await cards.wait_for(1)
            forged = json.dumps({"name": "pecho", "supportedInterfaces": [{"url": "mqtt://evil"}]}).encode()
            for payload, props in ((b"", None), (forged, None), (original.payload, offline)):
                seen = len(cards.messages)
                await attacker.publish(topic, payload, retain=True, properties=props)
                # The attacker's, then the agent's again (DESIGN: healed at once; bench/ has no figure
                # for it, the wait is the bound).
                await cards.wait_for(seen + 2, timeout=within(1.0))
                assert cards.messages[seen].payload == payload
                healed = cards.messages[-1]
                assert healed.payload == original.payload and healed.properties.get_extra(STATUS) == "online"
            assert metrics.cards_healed >= before + 3
        late = await retained_card(broker_settings, None, topic)
        assert late.payload == original.payload and late.properties.get_extra(STATUS) == "online"
    finally:
        await service.stop()
    # A clean stop's offline card is the agent's last word: stopped, it publishes nothing more.
    stopped = await retained_card(broker_settings, None, topic)
    assert stopped.properties.get_extra(STATUS) == "offline"
    # The next start finds that card on the broker: it publishes its own, and counts no heal.
    healed_before = metrics.cards_healed
    again = AgentService(Pecho(), namespace=namespace, broker=broker_settings, settings=emqx_settings(org))
    await again.start()
    try:
        assert again.profile is not None
        # The old card came on its subscription before this round trip's answer: seen, not healed.
        await round_trip(again.profile.transport, f"$a2a/v1/event/{org}/{UNIT}/pecho", publish=True)
        assert not again.profile.healer.pending
        assert metrics.cards_healed == healed_before
        assert (await retained_card(broker_settings, None, topic)).properties.get_extra(STATUS) == "online"
    finally:
        await again.stop()


def test_profile_agent_ids_of_replicas_and_agents_never_collide() -> None:
    """A replica's member ids are ``{agent}-{slot}``: an agent already called so is refused."""
    from mesh.brokertools.brokerrules import rules_by_user

    identities = [
        Identity("agent", "prep", "acme/ai", profile=ProfileScope("acme", UNIT, "prep", "prep", True), replica=True),
        Identity("agent", "other", "acme/ai", profile=ProfileScope("acme", UNIT, "prep-3")),
    ]
    with pytest.raises(ValueError, match=r"'prep' and 'other' would both be acme/lab/prep-3"):
        rules_by_user(identities)
    elsewhere = dataclasses.replace(identities[1], profile=ProfileScope("acme", "other-unit", "prep-3"))
    assert profile_user("other") in rules_by_user([identities[0], elsewhere])


def test_a_replica_without_its_profile_users_slot_count_says_what_to_mount(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A replica in slot 2 whose credentials hold ``prep@a2a`` but not ``prep@a2a.slots``
    (mounted before this version): its profile connection is ``prep@a2a`` under its instance id,
    as older rules allow, and the log names the file to mount. With the file: slot 2's user."""
    from agents.profile import _profile_broker
    from mesh.config.credentials import write_credentials

    write_credentials(tmp_path, {"prep": "p1", "prep@a2a": "p2"})
    broker = BrokerSettings(username="prep", password="p1", password_file=str(tmp_path))
    with caplog.at_level("WARNING", logger="agents.profile"):
        settings, slot = _profile_broker(broker, "prep", replica=True, slot=2)
    assert (settings.username, settings.password, slot) == ("prep@a2a", "p2", None)
    assert "prep@a2a.slots" in caplog.text
    (tmp_path / "prep@a2a.slots").write_text("16\n")
    settings, slot = _profile_broker(broker, "prep", replica=True, slot=2)
    assert (settings.username, settings.password, slot) == ("prep@a2a@2", "p2", 2)
