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

import time

from mesh.broker import BrokerSettings
from mesh.brokertools.doctorchecks import BrokerChecks, PeerChecks
from mesh.brokertools.doctorprobe import Check, Finding, Probe
from mesh.errors import MeshError
from mesh.transport import MqttTransport

__all__ = ["Finding", "diagnose"]


async def diagnose(settings: BrokerSettings, peer: BrokerSettings | None = None) -> list[Finding]:
    """Every check against ``settings`` (and across to ``peer``); raises ``ConnectError`` if no v5 session."""
    probe = Probe(settings)
    findings: list[Finding] = []
    try:
        started = time.perf_counter()
        main = await probe.connect()
        connect_ms = (time.perf_counter() - started) * 1000
        findings.append(Finding("MQTT v5 session", True, f"CONNACK in {connect_ms:.0f} ms", needed=True))
        findings += _capabilities(main)
        for check in BrokerChecks(probe, main).all():
            findings.append(await _safely(check))
        if peer is not None:
            for check in PeerChecks(probe, peer).all():
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
