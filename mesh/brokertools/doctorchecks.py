"""The checks of ``mesh doctor`` (:mod:`mesh.brokertools.doctor`): each a method that uses the
broker as a component would and reports one :class:`~mesh.brokertools.doctorprobe.Finding`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import statistics
import time

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerprobe import SLOW_ROUND_TRIP_MS
from mesh.brokertools.doctorprobe import PROBE_GROUP, WAIT_S, Check, Finding, Probe, nothing, received, run_child
from mesh.errors import MeshError, NoSubscribersError
from mesh.properties import MessageProperties
from mesh.transport import InboundMessage, MqttTransport

__all__ = ["BrokerChecks", "PeerChecks"]


class BrokerChecks:
    """What one broker does for the mesh, checked over ``main`` (and the probe's other connections)."""

    def __init__(self, probe: Probe, main: MqttTransport) -> None:
        self.probe, self.main, self.root = probe, main, probe.root

    def all(self) -> list[Check]:
        return [
            self.user_properties,
            self.response_topic,
            self.retained_to_new_subscriber,
            self.will,
            self.shared_subscription,
            self.no_local,
            self.persistent_session,
            self.no_subscribers,
            self.round_trip,
        ]

    async def user_properties(self) -> Finding:
        props = MessageProperties(extra=[("replyTo", f"{self.root}/r"), ("a2aStatusTopic", f"{self.root}/s")])
        got = await received(
            self.main, f"{self.root}/up", lambda: self.main.publish(f"{self.root}/up", b"x", properties=props)
        )
        seen = list(got.properties.user_properties()) if got is not None else []
        ok = ("replyTo", f"{self.root}/r") in seen and ("a2aStatusTopic", f"{self.root}/s") in seen
        return Finding(
            "user properties", ok, "kept" if ok else f"lost ({seen})", "routing data does not arrive", needed=True
        )

    async def response_topic(self) -> Finding:
        props = MessageProperties(reply_to=f"{self.root}/reply", correlation_data=b"\x00id-1")
        got = await received(
            self.main, f"{self.root}/rt", lambda: self.main.publish(f"{self.root}/rt", b"x", properties=props)
        )
        ok = (
            got is not None
            and got.properties.reply_to == f"{self.root}/reply"
            and got.properties.correlation_data == (b"\x00id-1")
        )
        return Finding(
            "response topic, correlation data",
            ok,
            "kept" if ok else "lost",
            "native v5 request/reply fields are dropped (user properties still route)",
        )

    async def retained_to_new_subscriber(self) -> Finding:
        await self.main.publish(f"{self.root}/retained", b"card", retain=True)
        late = await self.probe.connect()
        got = await received(late, f"{self.root}/retained", nothing)
        await self.main.publish(f"{self.root}/retained", b"", retain=True)
        ok = got is not None and got.retain
        return Finding(
            "retained delivery to a new subscriber",
            ok,
            "delivered" if ok else "not delivered",
            "watchers find agents by the roll call only",
        )

    async def will(self) -> Finding:
        watcher = await self.probe.connect()
        topic = f"{self.root}/will"
        claimed = self.probe.claim("doctor-will")
        try:
            got = await received(watcher, topic, lambda: run_child(claimed, will=topic))
        finally:
            claimed.release()
        ok = got is not None and got.payload == b"gone"
        return Finding(
            "wills",
            ok,
            "published when a connection dies" if ok else "not published",
            "a crashed agent's card stays: callers wait for their timeout",
            needed=True,
        )

    async def shared_subscription(self) -> Finding:
        if not self.main.capabilities.shared_subscriptions:
            return Finding(
                "$share delivery", False, "skipped: the broker said it has none", "agents cannot run as replicas"
            )
        got = await received(
            self.main,
            f"$share/{PROBE_GROUP}/{self.root}/shared",
            lambda: self.main.publish(f"{self.root}/shared", b"x"),
        )
        return Finding(
            "$share delivery", got is not None, "delivered" if got else "not delivered", "agents cannot run as replicas"
        )

    async def no_local(self) -> Finding:
        got = await received(
            self.main, f"{self.root}/nolocal", lambda: self.main.publish(f"{self.root}/nolocal", b"x"), no_local=True
        )
        return Finding(
            "no_local",
            got is None,
            "honoured" if got is None else "ignored",
            "a component may receive its own messages",
        )

    async def persistent_session(self) -> Finding:
        claimed = self.probe.claim("doctor-session")  # the child's user and id, then the one coming back
        topic = f"{self.root}/session"
        try:
            await run_child(claimed, subscribe=topic)
        except BaseException:
            claimed.release()
            raise
        await self.main.publish(topic, b"while away")
        persistent = dataclasses.replace(claimed.settings, session_expiry_s=60)
        back = MqttTransport(persistent, client_id=claimed.client_id)
        got: asyncio.Queue[InboundMessage] = asyncio.Queue()
        subscribing = asyncio.ensure_future(back.subscribe(topic, got.put_nowait))
        try:
            await back.connect()
            await subscribing
            message = await asyncio.wait_for(got.get(), WAIT_S)
            ok = message.payload == b"while away"
        except TimeoutError:
            ok = False
        finally:
            subscribing.cancel()
            with contextlib.suppress(MeshError):
                await back.close()
            claimed.release()
        return Finding(
            "persistent sessions and redelivery",
            ok,
            "kept" if ok else "lost",
            "answers published while a component reconnects are lost",
            needed=True,
        )

    async def no_subscribers(self) -> Finding:
        try:
            await self.main.publish_nowait(f"{self.root}/nobody", b"x", require_subscriber=True)
        except NoSubscribersError:
            return Finding("PUBACK 0x10 without subscribers", True, "reported")
        return Finding(
            "PUBACK 0x10 without subscribers",
            False,
            "not reported",
            "a call to a stopped agent waits for its timeout instead of failing at once",
        )

    async def round_trip(self) -> Finding:
        answerer = await self.probe.connect()
        answers: asyncio.Queue[float] = asyncio.Queue()

        async def answer(message: InboundMessage) -> None:
            await answerer.publish(f"{self.root}/answer", message.payload)

        await answerer.subscribe(f"{self.root}/request", answer)
        await self.main.subscribe(f"{self.root}/answer", lambda _: answers.put_nowait(time.perf_counter()))
        samples = []
        for _ in range(7):
            sent = time.perf_counter()
            await self.main.publish(f"{self.root}/request", b"ping")
            samples.append((await asyncio.wait_for(answers.get(), WAIT_S) - sent) * 1000)
        median = statistics.median(samples)
        return Finding(
            "QoS 1 round trip",
            min(samples) < SLOW_ROUND_TRIP_MS,
            f"{median:.2f} ms median",
            "slow: a broker that delays small packets; for Mosquitto set `set_tcp_nodelay true` and restart it",
        )


class PeerChecks:
    """What two nodes of a cluster do across: live and retained delivery, wills."""

    def __init__(self, probe: Probe, peer: BrokerSettings) -> None:
        self.probe, self.root = probe, probe.root
        self.peer = dataclasses.replace(peer, session_expiry_s=0)

    def all(self) -> list[Check]:
        return [self.live_across, self.retained_across, self.will_across]

    async def live_across(self) -> Finding:
        here, there = await self.probe.connect(), await self.probe.connect(self.peer)
        got = await received(there, f"{self.root}/x/live", lambda: here.publish(f"{self.root}/x/live", b"x"))
        return Finding(
            "across nodes: live messages",
            got is not None,
            "delivered" if got else "not delivered",
            "components on different nodes cannot talk",
            needed=True,
        )

    async def retained_across(self) -> Finding:
        here = await self.probe.connect()
        await here.publish(f"{self.root}/x/retained", b"card", retain=True)
        there = await self.probe.connect(self.peer)
        got = await received(there, f"{self.root}/x/retained", nothing)
        await here.publish(f"{self.root}/x/retained", b"", retain=True)
        return Finding(
            "across nodes: retained to a new subscriber",
            got is not None,
            "delivered" if got else "not delivered",
            "a watcher on the other node finds agents by the roll call only",
        )

    async def will_across(self) -> Finding:
        there = await self.probe.connect(self.peer)
        topic = f"{self.root}/x/will"
        claimed = self.probe.claim("doctor-will")
        try:
            got = await received(there, topic, lambda: run_child(claimed, will=topic))
        finally:
            claimed.release()
        return Finding(
            "across nodes: wills",
            got is not None,
            "delivered" if got else "not delivered",
            "a crashed agent's callers on the other node wait for their timeout",
            needed=True,
        )
