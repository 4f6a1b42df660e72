"""``mesh doctor``: what a broker can do for the mesh, checked as a component would use it.

Each check connects like a component (MQTT v5, QoS 1, a persistent session where it matters)
and reports one :class:`Finding`: passed or not, what was seen, and the consequence for the
mesh. ``needed`` findings that fail make the mesh unable to run (exit 2 from components);
the others degrade it (``mesh doctor`` exits 1). With a peer URL (a second node of a cluster)
the cross-node checks run too: live and retained delivery, wills and sessions across nodes.

The checks that need a connection to die without DISCONNECT (wills, resumed sessions) run a
short child process that connects and then exits without closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import statistics
import sys
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerprobe import SLOW_ROUND_TRIP_MS
from mesh.brokertools.brokerrules import PROBE_ROOT
from mesh.clientids import Claimed, client_transport, connection_for
from mesh.errors import MeshError, NoSubscribersError
from mesh.properties import MessageProperties
from mesh.transport import InboundMessage, MqttTransport

__all__ = ["Finding", "diagnose"]

#: The share group of the ``$share`` check.
PROBE_GROUP = "doctor"
#: How long a check waits for a message the broker should deliver.
WAIT_S = 3.0


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    ok: bool
    seen: str
    consequence: str = ""  # what a failure means for the mesh
    needed: bool = False  # the mesh cannot run without it

    def line(self) -> str:
        mark = "pass" if self.ok else ("FAIL" if self.needed else "warn")
        text = f"{mark}  {self.check:<44} {self.seen}"
        return text if self.ok or not self.consequence else f"{text}: {self.consequence}"


Check = Callable[[], Awaitable[Finding]]


class _Probe:
    """Connections of one diagnosis, on a root topic of its own; all closed at the end.

    Under rules that bind the doctor's user to its client ids (a secured ``mesh up``), each
    connection, a child process's included, takes a slot of that user (mesh.clientids)."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = dataclasses.replace(settings, session_expiry_s=0)
        self.root = f"{PROBE_ROOT}/{uuid.uuid4().hex[:12]}"
        self._open: list[MqttTransport] = []

    def claim(self, prefix: str) -> Claimed:
        """A user and client id for a connection this process opens itself (a random id where
        there are no slots), held until released."""
        otherwise = f"{prefix}-{uuid.uuid4().hex[:8]}"
        name = self.settings.username or ""
        return connection_for(self.settings, "client", "", name, otherwise)

    async def connect(self, settings: BrokerSettings | None = None, **options: object) -> MqttTransport:
        settings = settings or self.settings
        if "client_id" in options:
            transport = MqttTransport(settings, **options)  # type: ignore[arg-type]
        else:  # a slot of the user where the rules bind its client ids (mesh.clientids)
            transport = client_transport(settings, **options)
        await transport.connect()
        self._open.append(transport)
        return transport

    async def close(self) -> None:
        for transport in self._open:
            with contextlib.suppress(MeshError):
                await transport.close()


async def _received(
    transport: MqttTransport, topic_filter: str, send: Callable[[], Awaitable[None]], **subscribe: bool
) -> InboundMessage | None:
    """Subscribe, run ``send``, and return the first message (``None`` after :data:`WAIT_S`)."""
    got: asyncio.Queue[InboundMessage] = asyncio.Queue()
    await transport.subscribe(topic_filter, got.put_nowait, **subscribe)
    await send()
    try:
        return await asyncio.wait_for(got.get(), WAIT_S)
    except TimeoutError:
        return None


def _child_script(settings: BrokerSettings, client_id: str, subscribe: str | None, will_topic: str | None) -> str:
    """The child's program: the broker's address and TLS files (paths, not secrets) written in."""
    tls = settings.tls
    tls_options = None if tls is None else (tls.ca_file, tls.cert_file, tls.key_file, tls.insecure)
    return textwrap.dedent(
        f"""
        import asyncio, os
        from mesh.broker import BrokerSettings, TlsOptions
        from mesh.transport import MqttTransport, Will
        async def main():
            will = None if {will_topic!r} is None else Will(topic={will_topic!r}, payload=b"gone", qos=1)
            credentials = dict(username=os.environ.get("MESH_DOCTOR_USER"), password=os.environ.get("MESH_DOCTOR_PW"))
            tls = None if {tls_options!r} is None else TlsOptions(*{tls_options!r})
            settings = BrokerSettings(
                host={settings.host!r}, port={settings.port!r}, tls=tls, **{{k: v for k, v in credentials.items() if v}}
            )
            transport = MqttTransport(settings, client_id={client_id!r}, will=will)
            await transport.connect()
            if {subscribe!r} is not None:
                await transport.subscribe({subscribe!r}, lambda message: None)
            os._exit(0)  # no DISCONNECT: the broker sees the connection die
        asyncio.run(main())
        """
    )


async def _run_child(claimed: Claimed, *, subscribe: str | None = None, will: str | None = None) -> None:
    """Run a child that connects as ``claimed`` (its slot held here meanwhile) and dies without DISCONNECT."""
    settings = claimed.settings
    # The credentials go by environment, not on the command line (where `ps` would show them).
    credentials = {"MESH_DOCTOR_USER": settings.username or "", "MESH_DOCTOR_PW": settings.password or ""}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _child_script(settings, claimed.client_id, subscribe, will),
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **credentials},
    )
    _, err = await asyncio.wait_for(child.communicate(), 30)
    if child.returncode != 0:
        raise RuntimeError(err.decode(errors="replace").strip().splitlines()[-1] if err else "child failed")


async def diagnose(settings: BrokerSettings, peer: BrokerSettings | None = None) -> list[Finding]:
    """Every check against ``settings`` (and across to ``peer``); raises ``ConnectError`` if no v5 session."""
    probe = _Probe(settings)
    findings: list[Finding] = []
    try:
        started = time.perf_counter()
        main = await probe.connect()
        connect_ms = (time.perf_counter() - started) * 1000
        findings.append(Finding("MQTT v5 session", True, f"CONNACK in {connect_ms:.0f} ms", needed=True))
        findings += _capabilities(main)
        for check in _checks(probe, main):
            findings.append(await _safely(check))
        if peer is not None:
            for check in _peer_checks(probe, peer):
                findings.append(await _safely(check))
    finally:
        await probe.close()
    return findings


async def _safely(check: Check) -> Finding:
    try:
        return await check()
    except (MeshError, RuntimeError, TimeoutError, OSError) as exc:
        name = getattr(check, "__name__", "check").removeprefix("_").replace("_", " ")
        return Finding(name, False, f"error: {exc}", "see the broker's log")


def _capabilities(transport: MqttTransport) -> list[Finding]:
    caps = transport.capabilities
    keep_alive = caps.server_keep_alive
    return [
        Finding(
            "shared subscriptions ($share)",
            caps.shared_subscriptions,
            _yes(caps.shared_subscriptions),
            "agents cannot run as replicas (they refuse to start, exit 2)",
        ),
        Finding(
            "retained messages",
            caps.retain,
            _yes(caps.retain),
            "cards are published unretained: watchers find agents by the roll call only",
        ),
        Finding(
            "wildcard subscriptions",
            caps.wildcard_subscriptions,
            _yes(caps.wildcard_subscriptions),
            "discovery and answers cannot be subscribed",
            needed=True,
        ),
        Finding(
            "subscription identifiers",
            caps.subscription_identifiers,
            _yes(caps.subscription_identifiers),
            "messages are matched to handlers by topic (a little slower)",
        ),
        Finding(
            "maximum QoS", caps.maximum_qos >= 1, str(caps.maximum_qos), "requests and answers need QoS 1", needed=True
        ),
        Finding(
            "receive maximum",
            caps.receive_maximum >= 100,
            str(caps.receive_maximum),
            "few unacknowledged messages in flight: bursts are slower",
        ),
        Finding(
            "maximum packet size",
            caps.maximum_packet_size >= 1_048_576,
            f"{caps.maximum_packet_size} bytes",
            "messages above it are refused before publishing: send large files as artifact URIs",
        ),
        Finding("topic alias maximum", True, f"{caps.topic_alias_maximum} (the mesh sends no aliases)"),
        Finding(
            "server keep alive",
            True,
            "as asked"
            if keep_alive is None
            else f"{keep_alive} s, set by the broker: a frozen component leaves within {keep_alive * 1.5:g} s",
        ),
        Finding("assigned client identifier", True, caps.assigned_client_identifier or "none (the mesh names its own)"),
    ]


def _yes(flag: bool) -> str:
    return "available" if flag else "not available (CONNACK)"


def _checks(probe: _Probe, main: MqttTransport) -> list[Check]:
    root = probe.root

    async def user_properties() -> Finding:
        props = MessageProperties(extra=[("replyTo", f"{root}/r"), ("a2aStatusTopic", f"{root}/s")])
        got = await _received(main, f"{root}/up", lambda: main.publish(f"{root}/up", b"x", properties=props))
        seen = list(got.properties.user_properties()) if got is not None else []
        ok = ("replyTo", f"{root}/r") in seen and ("a2aStatusTopic", f"{root}/s") in seen
        return Finding(
            "user properties", ok, "kept" if ok else f"lost ({seen})", "routing data does not arrive", needed=True
        )

    async def response_topic() -> Finding:
        props = MessageProperties(reply_to=f"{root}/reply", correlation_data=b"\x00id-1")
        got = await _received(main, f"{root}/rt", lambda: main.publish(f"{root}/rt", b"x", properties=props))
        ok = (
            got is not None
            and got.properties.reply_to == f"{root}/reply"
            and got.properties.correlation_data == (b"\x00id-1")
        )
        return Finding(
            "response topic, correlation data",
            ok,
            "kept" if ok else "lost",
            "native v5 request/reply fields are dropped (user properties still route)",
        )

    async def retained_to_new_subscriber() -> Finding:
        await main.publish(f"{root}/retained", b"card", retain=True)
        late = await probe.connect()
        got = await _received(late, f"{root}/retained", _nothing)
        await main.publish(f"{root}/retained", b"", retain=True)
        ok = got is not None and got.retain
        return Finding(
            "retained delivery to a new subscriber",
            ok,
            "delivered" if ok else "not delivered",
            "watchers find agents by the roll call only",
        )

    async def will() -> Finding:
        watcher = await probe.connect()
        topic = f"{root}/will"
        claimed = probe.claim("doctor-will")
        try:
            got = await _received(watcher, topic, lambda: _run_child(claimed, will=topic))
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

    async def shared_subscription() -> Finding:
        if not main.capabilities.shared_subscriptions:
            return Finding(
                "$share delivery", False, "skipped: the broker said it has none", "agents cannot run as replicas"
            )
        got = await _received(main, f"$share/{PROBE_GROUP}/{root}/shared", lambda: main.publish(f"{root}/shared", b"x"))
        return Finding(
            "$share delivery", got is not None, "delivered" if got else "not delivered", "agents cannot run as replicas"
        )

    async def no_local() -> Finding:
        got = await _received(main, f"{root}/nolocal", lambda: main.publish(f"{root}/nolocal", b"x"), no_local=True)
        return Finding(
            "no_local",
            got is None,
            "honoured" if got is None else "ignored",
            "a component may receive its own messages",
        )

    async def persistent_session() -> Finding:
        claimed = probe.claim("doctor-session")  # the child's user and id, then the one coming back
        topic = f"{root}/session"
        try:
            await _run_child(claimed, subscribe=topic)
        except BaseException:
            claimed.release()
            raise
        await main.publish(topic, b"while away")
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

    async def no_subscribers() -> Finding:
        try:
            await main.publish_nowait(f"{root}/nobody", b"x", require_subscriber=True)
        except NoSubscribersError:
            return Finding("PUBACK 0x10 without subscribers", True, "reported")
        return Finding(
            "PUBACK 0x10 without subscribers",
            False,
            "not reported",
            "a call to a stopped agent waits for its timeout instead of failing at once",
        )

    async def round_trip() -> Finding:
        answerer = await probe.connect()
        answers: asyncio.Queue[float] = asyncio.Queue()

        async def answer(message: InboundMessage) -> None:
            await answerer.publish(f"{root}/answer", message.payload)

        await answerer.subscribe(f"{root}/request", answer)
        await main.subscribe(f"{root}/answer", lambda _: answers.put_nowait(time.perf_counter()))
        samples = []
        for _ in range(7):
            sent = time.perf_counter()
            await main.publish(f"{root}/request", b"ping")
            samples.append((await asyncio.wait_for(answers.get(), WAIT_S) - sent) * 1000)
        median = statistics.median(samples)
        return Finding(
            "QoS 1 round trip",
            min(samples) < SLOW_ROUND_TRIP_MS,
            f"{median:.2f} ms median",
            "slow: a broker that delays small packets; for Mosquitto set `set_tcp_nodelay true` and restart it",
        )

    return [
        user_properties,
        response_topic,
        retained_to_new_subscriber,
        will,
        shared_subscription,
        no_local,
        persistent_session,
        no_subscribers,
        round_trip,
    ]


def _peer_checks(probe: _Probe, peer: BrokerSettings) -> list[Check]:
    root = probe.root
    peer_probe = dataclasses.replace(peer, session_expiry_s=0)

    async def live_across() -> Finding:
        here, there = await probe.connect(), await probe.connect(peer_probe)
        got = await _received(there, f"{root}/x/live", lambda: here.publish(f"{root}/x/live", b"x"))
        return Finding(
            "across nodes: live messages",
            got is not None,
            "delivered" if got else "not delivered",
            "components on different nodes cannot talk",
            needed=True,
        )

    async def retained_across() -> Finding:
        here = await probe.connect()
        await here.publish(f"{root}/x/retained", b"card", retain=True)
        there = await probe.connect(peer_probe)
        got = await _received(there, f"{root}/x/retained", _nothing)
        await here.publish(f"{root}/x/retained", b"", retain=True)
        return Finding(
            "across nodes: retained to a new subscriber",
            got is not None,
            "delivered" if got else "not delivered",
            "a watcher on the other node finds agents by the roll call only",
        )

    async def will_across() -> Finding:
        there = await probe.connect(peer_probe)
        topic = f"{root}/x/will"
        claimed = probe.claim("doctor-will")
        try:
            got = await _received(there, topic, lambda: _run_child(claimed, will=topic))
        finally:
            claimed.release()
        return Finding(
            "across nodes: wills",
            got is not None,
            "delivered" if got else "not delivered",
            "a crashed agent's callers on the other node wait for their timeout",
            needed=True,
        )

    return [live_across, retained_across, will_across]


async def _nothing() -> None:
    """Send nothing: the message looked for is already on the broker."""
