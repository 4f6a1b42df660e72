"""The raw paho floor for bench/transport.py: stock paho-mqtt, nothing from the mesh.

Runs in processes of its own, so that nothing of the mesh's (its faster ``Properties`` codec,
its event loop) can touch the floor. Written the fastest way paho allows: callbacks publish
the next message from paho's network thread, with the same bytes on the wire as the mesh
(payload, user properties, native v5 fields, QoS 1).

    python bench/paho_floor.py serve URL TOPIC          # echo responder, prints "ready"
    python bench/paho_floor.py measure URL TOPIC N M W  # prints {"rtt_us", "p99_us", "rps"}
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import threading
import time
import uuid
from urllib.parse import urlsplit

import paho.mqtt.client as paho
import paho.mqtt.properties as paho_properties
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


def client(url: str) -> paho.Client:
    parts = urlsplit(url)
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"paho-{uuid.uuid4().hex[:8]}", protocol=paho.MQTTv5)
    c.max_inflight_messages_set(1000)
    c.on_socket_open = lambda _c, _u, s: s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.connect(parts.hostname or "localhost", parts.port or 1883)
    return c


def subscribe_and_start(c: paho.Client, topic: str) -> None:
    subscribed = threading.Event()
    c.on_subscribe = lambda *_args: subscribed.set()
    c.subscribe(topic, qos=1)
    c.loop_start()
    if not subscribed.wait(10):
        raise RuntimeError(f"no SUBACK for {topic}")


def serve(url: str, topic: str) -> None:
    c = client(url)

    def on_message(cl: paho.Client, _userdata: object, msg: paho.MQTTMessage) -> None:
        reply_to = getattr(msg.properties, "ResponseTopic", None)
        if reply_to:
            props = Properties(PacketTypes.PUBLISH)
            props.CorrelationData = msg.properties.CorrelationData
            props.ContentType = "application/json"
            props.PayloadFormatIndicator = 1
            cl.publish(reply_to, msg.payload, qos=1, properties=props)

    c.on_message = on_message
    subscribe_and_start(c, topic)
    print("ready", flush=True)
    threading.Event().wait()


class Requester:
    """Request/reply driven from paho's callbacks: no thread hand-off between messages."""

    def __init__(self, url: str, topic: str, payload: bytes) -> None:
        self.topic = topic
        self.payload = payload
        self.client_id = f"bench-paho-{uuid.uuid4().hex[:8]}"
        self.reply_topic = f"{topic}/replies/{self.client_id}"
        self.client = client(url)
        self.client.on_message = self._on_message
        subscribe_and_start(self.client, self.reply_topic)
        self._sent_at: dict[bytes, float] = {}
        self._samples: list[float] = []
        self._to_send = 0
        self._outstanding = 0
        self._done = threading.Event()
        # Replies arrive on paho's thread while run() is still filling the window.
        self._lock = threading.Lock()

    def _publish(self) -> None:
        correlation = uuid.uuid4().hex.encode()
        props = Properties(PacketTypes.PUBLISH)
        props.UserProperty = [
            ("clientId", self.client_id),
            ("userId", "bench-user"),
            ("replyTo", self.reply_topic),
            ("callDepth", "0"),
            ("timestamp", str(int(time.time() * 1000))),
        ]
        props.ResponseTopic = self.reply_topic
        props.CorrelationData = correlation
        props.ContentType = "application/json"
        props.PayloadFormatIndicator = 1
        props.MessageExpiryInterval = 10
        self._to_send -= 1
        self._outstanding += 1
        self._sent_at[correlation] = time.perf_counter()
        self.client.publish(self.topic, self.payload, qos=1, properties=props)

    def _on_message(self, _c: paho.Client, _u: object, msg: paho.MQTTMessage) -> None:
        with self._lock:
            sent = self._sent_at.pop(msg.properties.CorrelationData, None)
            if sent is None:
                return
            self._samples.append(time.perf_counter() - sent)
            self._outstanding -= 1
            if self._to_send > 0:
                self._publish()
            elif self._outstanding == 0:
                self._done.set()

    def run(self, total: int, window: int) -> tuple[list[float], float]:
        self._samples, self._to_send, self._outstanding = [], total, 0
        self._done.clear()
        start = time.perf_counter()
        with self._lock:
            for _ in range(min(window, total)):
                self._publish()
        if not self._done.wait(300):
            raise RuntimeError("paho requester stalled")
        return self._samples, time.perf_counter() - start


def measure(url: str, topic: str, payload: bytes, requests: int, window_requests: int, window: int) -> dict[str, float]:
    requester = Requester(url, topic, payload)
    requester.run(200, 1)  # warm-up
    samples, _ = requester.run(requests, 1)
    _, elapsed = requester.run(window_requests, window)
    requester.client.disconnect()
    requester.client.loop_stop()
    ordered = sorted(samples)
    return {
        "rtt_us": round(statistics.median(samples) * 1e6, 1),
        "p99_us": round(ordered[int(len(ordered) * 0.99)] * 1e6, 1),
        "rps": round(window_requests / elapsed),
    }


def main() -> None:
    # The floor must be stock paho, not the mesh's faster Properties.
    assert paho.Properties is paho_properties.Properties, "the paho floor must not import the mesh"
    mode, url, topic = sys.argv[1:4]
    if mode == "serve":
        serve(url, topic)
    else:
        requests, window_requests, window = (int(v) for v in sys.argv[4:7])
        payload = sys.stdin.buffer.read()
        print(json.dumps(measure(url, topic, payload, requests, window_requests, window)), flush=True)


if __name__ == "__main__":
    main()
