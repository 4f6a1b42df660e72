"""What bench/scale.py reads off its processes and the broker: RSS and CPU from /proc, and a
minimal MQTT 3.1.1 watcher cheap enough that 100 of them measure the broker, not this process.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable
from pathlib import Path

from mesh.broker import BrokerSettings

__all__ = ["cpu_s", "rss_kb", "tree_rss_kb", "watch_topic"]


def rss_kb(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def tree_rss_kb(pid: int) -> int:
    """The RSS of ``pid`` and its children: a ``mesh run`` and its task journals' writer process."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return rss_kb(pid) + sum(rss_kb(child) for child in children)


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def watch_topic(
    broker: BrokerSettings, topic_filter: str, on_publish: Callable[[bytes, bool], None]
) -> tuple[asyncio.Task[None], asyncio.StreamWriter]:
    """A watcher of the start-up: a plain MQTT 3.1.1 subscriber (QoS 0) that calls ``on_publish(topic,
    has_payload)`` per message, a few microseconds each. paho's ~50 us per message would make 100
    watchers of 1,000 cards (100,000 messages) this process's start-up, not the one measured."""
    reader, writer = await asyncio.open_connection(broker.host, broker.port)
    client_id = f"watch-{uuid.uuid4().hex[:12]}".encode()
    connect = b"\x00\x04MQTT\x04\x02\x00\x00" + len(client_id).to_bytes(2, "big") + client_id  # clean, no keepalive
    writer.write(b"\x10" + _vbi(len(connect)) + connect)
    wanted = topic_filter.encode()
    subscribe = b"\x00\x01" + len(wanted).to_bytes(2, "big") + wanted + b"\x00"
    writer.write(b"\x82" + _vbi(len(subscribe)) + subscribe)
    buffer = bytearray()

    def handle(kind: int, body: memoryview) -> bool:
        """Whether the packet is the SUBACK (the broker has the subscription)."""
        if kind & 0xF0 == 0x30:  # PUBLISH, QoS 0: topic length, topic, payload
            length = int.from_bytes(body[:2], "big")
            on_publish(bytes(body[2 : 2 + length]), len(body) > 2 + length)
        elif kind == 0x20 and body[1] != 0:
            raise RuntimeError(f"the broker refused the watcher: CONNACK {body[1]}")
        return kind == 0x90

    subscribed = False
    while not subscribed:
        chunk = await reader.read(65536)
        if not chunk:
            raise RuntimeError("the broker closed the watcher's connection")
        buffer += chunk
        for kind, body in _packets(buffer):
            subscribed = handle(kind, body) or subscribed

    async def read() -> None:
        while chunk := await reader.read(1 << 20):
            buffer.extend(chunk)
            for kind, body in _packets(buffer):
                handle(kind, body)

    return asyncio.get_running_loop().create_task(read()), writer


def _vbi(value: int) -> bytes:
    out = bytearray()
    while True:
        value, digit = divmod(value, 128)
        out.append(digit | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _packets(buffer: bytearray) -> list[tuple[int, memoryview]]:
    """The whole packets at the start of ``buffer`` (removed from it): (first byte, body)."""
    found: list[tuple[int, memoryview]] = []
    pos = 0
    data = bytes(buffer)
    while pos + 2 <= len(data):
        length = shift = 0
        cursor = pos + 1
        while cursor < len(data):
            byte = data[cursor]
            length |= (byte & 0x7F) << shift
            shift += 7
            cursor += 1
            if not byte & 0x80:
                break
        else:
            break
        if cursor + length > len(data):
            break
        found.append((data[pos], memoryview(data)[cursor : cursor + length]))
        pos = cursor + length
    del buffer[:pos]
    return found
