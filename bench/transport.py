"""Request -> reply through the mesh transport versus raw paho, on the same broker, in one run.

Both sides exchange the same bytes: a ~300-byte A2A ``message/send`` request carrying the
mesh's user properties and native v5 fields (QoS 1), answered by a responder in its own
process that echoes the Correlation Data (QoS 1). The paho floor (bench/paho_floor.py) is
stock paho in processes of its own, written the fastest way paho allows: callbacks publish
the next message from paho's network thread. The mesh side includes the transport's faster
``Properties`` codec (mesh/transport/codec.py), which is most of its lead over stock paho.

Measures the sequential round trip (median, p99) and windowed throughput (100 requests in
flight). Last line on stdout::

    {"mesh_rtt_us": ..., "paho_rtt_us": ..., "rtt_ratio": ..., "mesh_rps": ..., "paho_rps": ..., "rps_ratio": ...}

Run: ``python bench/transport.py [--broker URL] [--requests N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import (
    base_arguments,
    broker_url,
    child,
    emit,
    median_us,
    p99_us,
    progress,
    ratio,
)
from mesh.broker import BrokerSettings
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage, MqttTransport

WINDOW = 100
FLOOR = str(Path(__file__).resolve().parent / "paho_floor.py")
PAYLOAD = (
    b'{"jsonrpc":"2.0","id":"task-0123456789abcdef","method":"message/send","params":{"message":'
    b'{"kind":"message","messageId":"0123456789abcdef0123456789abcdef","role":"user","parts":'
    b'[{"kind":"text","text":"Analyze the quarterly sales data and summarise the top three trends."}],'
    b'"contextId":"session-abc"},"configuration":{"blocking":true}}}'
)


def request_properties(client_id: str) -> MessageProperties:
    """What a mesh client puts on a request (reply topic and correlation are added per call)."""
    return MessageProperties(
        client_id=client_id,
        user_id="bench-user",
        call_depth=0,
        timestamp_ms=int(time.time() * 1000),
        content_type=JSON_CONTENT_TYPE,
        payload_format_utf8=True,
    )


# ---------------------------------------------------------------- responders (child processes)


async def serve_mesh(url: str, topic: str) -> None:
    transport = MqttTransport(BrokerSettings.from_url(url))
    await transport.connect()

    async def echo(message: InboundMessage) -> None:
        reply_to = message.properties.reply_to
        if reply_to:
            props = MessageProperties(
                correlation_data=message.properties.correlation_data,
                content_type=JSON_CONTENT_TYPE,
                payload_format_utf8=True,
            )
            await transport.publish(reply_to, message.payload, properties=props)

    await transport.subscribe(topic, echo)
    print("ready", flush=True)
    await asyncio.Event().wait()


# ---------------------------------------------------------------- mesh requester


class Requester:
    """Request -> reply over one transport: Response Topic + Correlation Data, replies by correlation.

    The mesh's own calls (mesh.calls) add JSON-RPC framing and parsing on top; this measures
    the transport alone, as the paho floor does.
    """

    def __init__(self, transport: MqttTransport, reply_topic: str) -> None:
        self.transport = transport
        self.reply_topic = reply_topic
        self._waiting: dict[bytes, asyncio.Future[InboundMessage]] = {}

    async def start(self) -> None:
        await self.transport.subscribe(self.reply_topic, self._on_reply)

    def _on_reply(self, message: InboundMessage) -> None:
        waiting = self._waiting.pop(message.properties.correlation_data or b"", None)
        if waiting is not None and not waiting.done():
            waiting.set_result(message)

    async def request(self, topic: str, properties: MessageProperties, timeout: float) -> InboundMessage:
        correlation = uuid.uuid4().hex.encode()
        properties.reply_to, properties.correlation_data = self.reply_topic, correlation
        reply = self._waiting[correlation] = asyncio.get_running_loop().create_future()
        self.transport.publish_nowait(topic, PAYLOAD, properties=properties)
        try:
            return await asyncio.wait_for(reply, timeout)
        finally:
            self._waiting.pop(correlation, None)


async def mesh_measure(url: str, topic: str, requests: int, window_requests: int) -> dict[str, float]:
    client_id = f"bench-mesh-{uuid.uuid4().hex[:8]}"
    transport = MqttTransport(BrokerSettings.from_url(url), client_id=client_id)
    await transport.connect()
    requester = Requester(transport, f"{topic}/replies/{client_id}")
    await requester.start()
    try:
        for _ in range(200):  # warm-up
            await requester.request(topic, request_properties(client_id), timeout=10)
        samples = []
        for _ in range(requests):
            start = time.perf_counter()
            await requester.request(topic, request_properties(client_id), timeout=10)
            samples.append(time.perf_counter() - start)

        remaining = window_requests

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await requester.request(topic, request_properties(client_id), timeout=30)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(WINDOW)))
        elapsed = time.perf_counter() - start
    finally:
        await transport.close()
    return {"rtt_us": median_us(samples), "p99_us": p99_us(samples), "rps": round(window_requests / elapsed)}


def paho_measure(url: str, topic: str, requests: int, window_requests: int) -> dict[str, float]:
    """Run the stock-paho requester in a process of its own (see bench/paho_floor.py)."""
    result = subprocess.run(
        [sys.executable, FLOOR, "measure", url, topic, str(requests), str(window_requests), str(WINDOW)],
        input=PAYLOAD,
        capture_output=True,
        check=True,
        timeout=600,
    )
    return json.loads(result.stdout.decode().strip().splitlines()[-1])


# ---------------------------------------------------------------- main


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="sequential requests for the round trip")
    parser.add_argument("--window-requests", type=int, default=20000, help="requests for the throughput run")
    parser.add_argument("--serve", choices=["mesh"], help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve == "mesh":
        asyncio.run(serve_mesh(args.broker, args.topic))
        return

    script = str(Path(__file__).resolve())
    with broker_url(args.broker) as url:
        ns = f"bench/{uuid.uuid4().hex[:8]}"
        mesh_topic, paho_topic = f"{ns}/mesh/service", f"{ns}/paho/service"
        with (
            child([script, "--serve", "mesh", "--broker", url, "--topic", mesh_topic]),
            child([FLOOR, "serve", url, paho_topic]),
        ):
            progress(f"paho floor: {args.requests} sequential, then {args.window_requests} with {WINDOW} in flight")
            paho_result = paho_measure(url, paho_topic, args.requests, args.window_requests)
            progress(f"paho: {paho_result}")
            progress(f"mesh transport: {args.requests} sequential, then {args.window_requests} with {WINDOW} in flight")
            mesh_result = asyncio.run(mesh_measure(url, mesh_topic, args.requests, args.window_requests))
            progress(f"mesh: {mesh_result}")
    emit(
        {
            "mesh_rtt_us": mesh_result["rtt_us"],
            "paho_rtt_us": paho_result["rtt_us"],
            "rtt_ratio": ratio(mesh_result["rtt_us"], paho_result["rtt_us"]),
            "mesh_rps": mesh_result["rps"],
            "paho_rps": paho_result["rps"],
            "rps_ratio": ratio(mesh_result["rps"], paho_result["rps"]),
            "mesh_p99_us": mesh_result["p99_us"],
            "paho_p99_us": paho_result["p99_us"],
            "requests": args.requests,
            "window": WINDOW,
            "window_requests": args.window_requests,
            "payload_bytes": len(PAYLOAD),
            "qos": 1,
        }
    )


if __name__ == "__main__":
    main()
