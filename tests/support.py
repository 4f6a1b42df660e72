"""Test helpers that wait on events, never on sleeps."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from mesh.client import MeshClient
from mesh.properties import MessageProperties
from mesh.transport import InboundMessage, Transport
from tests.agents.service_agents import Echo
from topics import get_agent_discovery_topic, get_agent_request_topic, get_client_response_topic

T = TypeVar("T")


class Inbox:
    """A subscription handler that records messages and lets a test await them."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self._changed = asyncio.Event()

    def __call__(self, message: InboundMessage) -> None:
        self.messages.append(message)
        self._changed.set()

    async def wait_for(self, count: int, timeout: float = 5.0) -> list[InboundMessage]:
        """Wait until at least ``count`` messages arrived; return them all."""
        await wait_until(
            lambda: len(self.messages) >= count,
            self._changed,
            timeout,
            lambda: f"expected {count} messages, got {len(self.messages)}",
        )
        return self.messages

    async def wait_until_topic(self, topic: str, timeout: float = 5.0) -> list[InboundMessage]:
        """Wait until a message on ``topic`` arrived; return every message so far."""
        await wait_until(
            lambda: any(m.topic == topic for m in self.messages),
            self._changed,
            timeout,
            lambda: f"nothing on {topic} among {len(self.messages)} messages",
        )
        return self.messages

    async def wait_for_payload(self, payload: bytes, timeout: float = 5.0) -> list[InboundMessage]:
        """Wait until a message with ``payload`` arrived (b"": a retained message cleared)."""
        await wait_until(
            lambda: payload in self.payloads,
            self._changed,
            timeout,
            lambda: f"no {payload!r} among {len(self.messages)} messages",
        )
        return self.messages

    @property
    def payloads(self) -> list[bytes]:
        return [m.payload for m in self.messages]


async def raw_request(
    transport: Transport,
    namespace: str,
    topic: str,
    payload: bytes,
    *,
    correlation_id: str,
    properties: MessageProperties | None = None,
    timeout: float = 5.0,
) -> InboundMessage:
    """Publish ``payload`` as is and return the answer with its Correlation Data.

    For tests of what an agent does with requests the call path would never send (malformed,
    aliased, with odd properties); everything else calls agents through ``mesh.calls``.
    """
    reply_topic = get_client_response_topic(namespace, f"raw-{uuid.uuid4().hex[:12]}")
    inbox = Inbox()
    subscription = await transport.subscribe(reply_topic, inbox)
    try:
        props = dataclasses.replace(properties) if properties is not None else MessageProperties()
        props.reply_to, props.correlation_data = reply_topic, correlation_id.encode()
        await transport.publish(topic, payload, properties=props)
        [answer] = await inbox.wait_for(1, timeout)
        return answer
    finally:
        await transport.unsubscribe(subscription)


async def answer_of(
    client: MeshClient,
    payload: bytes,
    properties: MessageProperties | None = None,
    agent: str = "echo",
    timeout: float = 5.0,
) -> dict[str, Any]:
    """The JSON answer of ``agent`` to ``payload`` published as is (see :func:`raw_request`)."""
    reply = await raw_request(
        client.transport,
        client.namespace,
        get_agent_request_topic(client.namespace, agent),
        payload,
        correlation_id="c-1",
        properties=properties,
        timeout=timeout,
    )
    answer: dict[str, Any] = json.loads(reply.payload)
    return answer


async def round_trip(transport: Transport, topic: str, *, publish: bool = False) -> None:
    """A round trip on ``transport``'s connection: SUBSCRIBE/SUBACK on ``topic`` (one it may read
    and does not read yet), or with ``publish`` an empty QoS 1 PUBLISH/PUBACK (one it may write).

    An absence is proven by it rather than by a sleep: the broker answers a connection's packets in
    order, so once the answer is in, whatever the broker sent this connection before (a message, a
    DISCONNECT) has arrived too; a connection the broker closed never gets it.
    """
    if publish:
        await transport.publish(topic, b"")
        return
    subscription = await transport.subscribe(topic, _ignore)
    await transport.unsubscribe(subscription)


def _ignore(_message: InboundMessage) -> None:
    return None


#: How much room a test gives one of DESIGN's guarantees (a caller learns within 2 s that its
#: callee is gone): bench/ measures the figure; a test asserts the bound times this, so a loaded CI
#: machine passes while a wait that ran into a 30 s timeout still fails.
GENEROUS = 2.5


def within(bound_s: float) -> float:
    """The bound a test asserts for a guarantee of ``bound_s`` seconds (see :data:`GENEROUS`)."""
    return bound_s * GENEROUS


async def wait_until(
    condition: Callable[[], bool],
    changed: asyncio.Event,
    timeout: float,
    describe: Callable[[], str] = lambda: "condition not met",
) -> None:
    """Re-check ``condition`` each time ``changed`` fires, up to ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                changed.clear()
                if condition():
                    return
                await changed.wait()
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout:g} s: {describe()}") from None


async def start_agent_process(
    broker_url: str,
    namespace: str,
    name: str = "echo",
    interval_s: float = 10.0,
    agent: str = "Echo",
    *,
    replica: bool = False,
) -> asyncio.subprocess.Process:
    """An agent of ``tests.agents.service_agents`` (``agent`` names its class) in a process of its
    own (to kill -9), once it has announced itself."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from agents import AgentSettings
        from agents.service import AgentService
        from mesh.broker import BrokerSettings
        from tests.agents.service_agents import {agent}
        async def main():
            service = AgentService({agent}(name={name!r}), broker=BrokerSettings.from_url({broker_url!r}),
                                   namespace={namespace!r}, settings=AgentSettings(card_interval_s={interval_s},
                                                                          shared_subscription={replica}))
            await service.start()
            print("ready", flush=True)
            await asyncio.Event().wait()
        asyncio.run(main())
        """
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()}
    )
    assert proc.stdout is not None
    assert (await asyncio.wait_for(proc.stdout.readline(), 20)).strip() == b"ready"
    return proc


async def ended_at(outcome: Awaitable[T]) -> tuple[T | Exception, float]:
    """What ``outcome`` came to (its result, or the exception it raised) and when (monotonic s)."""
    try:
        value: T | Exception = await outcome
    except Exception as exc:
        value = exc
    return value, time.monotonic()


async def publish_stale_card(transport: Transport, namespace: str, name: str) -> None:
    """A retained card of an Echo named ``name`` with no agent behind it (a crash whose will was lost)."""
    card = Echo(name=name).card(url="mqtt://nowhere", push_notifications=False).to_json_bytes()
    await transport.publish(get_agent_discovery_topic(namespace, name), card, retain=True)


#: The first Mosquitto that checks keepalives every second (it was every 6 s before, so a frozen
#: client could outlive 1.5 x keepalive by 6 s); .ci/setup builds it when the installed one is older.
PRECISE_KEEPALIVE_MOSQUITTO = (2, 0, 21)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rpartition(")")[2].split()[0] != "Z"


def precise_keepalive_mosquitto() -> str:
    """The installed mosquitto if it is 2.0.21 or newer, else the one .ci/setup built."""
    installed = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if Path(installed).is_file():
        banner = subprocess.run([installed, "-h"], capture_output=True, text=True).stdout
        found = re.search(r"mosquitto version (\d+)\.(\d+)\.(\d+)", banner)
        if found and tuple(int(part) for part in found.groups()) >= PRECISE_KEEPALIVE_MOSQUITTO:
            return installed
    version = ".".join(str(part) for part in PRECISE_KEEPALIVE_MOSQUITTO)
    built = Path(__file__).resolve().parent.parent / ".ci" / "cache" / f"mosquitto-{version}" / "mosquitto"
    if not built.is_file():
        raise AssertionError(f"no Mosquitto {version} or newer: run .ci/setup, which builds one into {built.parent}")
    return str(built)


async def start_replica_script(script: str, *, timeout_s: float = 30.0) -> tuple[asyncio.subprocess.Process, str]:
    """Run ``script`` (a replica that prints ``ready <instance>`` once started) in a process of its
    own, so that it can be killed as a host would die; its process and instance id."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()}
    )
    assert proc.stdout is not None
    ready, instance = (await asyncio.wait_for(proc.stdout.readline(), timeout_s)).decode().split()
    assert ready == "ready"
    return proc, instance
