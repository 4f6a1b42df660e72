#!/usr/bin/env python3
"""An A2E worker in plain Python (standard library only, nothing from this project).

It answers on stdout, one JSON object per line, what the mesh sends on stdin:
``handshake/req``, ``skill/discover/req``, ``skill/call/req``, ``ping`` and ``shutdown``.
Skills: ``echo`` answers the text it gets; ``countdown`` streams progress events and a text
artifact in chunks. Long calls run in threads, so several can be in flight (``max_parallel``).

Run it on the mesh with ``worker: {command: [python3, echo_worker.py]}``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
import uuid
from typing import Any

MAX_PARALLEL = 4
SKILLS = [
    {
        "name": "echo",
        "description": "Answers the text it is sent",
        "triggers": ["hello"],
        "tags": ["echo", "demo"],
    },
    {
        "name": "countdown",
        "description": "Counts down from N, streaming progress and the count as an artifact",
        "argument_hint": "a whole number from 1 to 20",
        "tags": ["streaming", "demo"],
    },
]
_out = threading.Lock()
_started = time.monotonic()
_encode = json.JSONEncoder(separators=(",", ":")).encode


def send(type_: str, **fields: Any) -> None:
    message = {"type": type_, "id": uuid.uuid4().hex, "version": "1.0", "ts": time.time(), **fields}
    line = (_encode(message) + "\n").encode()
    with _out:  # one whole line per write(2), whatever thread writes: no buffer to flush
        while line:
            line = line[os.write(1, line) :]


def result(req_id: str, name: str, started: float, **fields: Any) -> None:
    data = {"success": True, "duration_ms": int((time.monotonic() - started) * 1000), **fields}
    send("skill/call/resp", req_id=req_id, name=name, data=data)


def failure(req_id: str, name: str, code: str, error: str) -> None:
    data = {"success": False, "duration_ms": 0, "error": error, "error_code": code}
    send("skill/call/resp", req_id=req_id, name=name, data=data)


def call(request: dict[str, Any]) -> None:
    req_id, name, started = request["id"], request.get("name"), time.monotonic()
    arguments = request.get("arguments") or {}
    if name == "echo":
        result(req_id, name, started, summary=str(arguments.get("text", "")))
    elif name == "countdown":
        text = str(arguments.get("text", arguments.get("n", "")))
        if not text.strip().isdigit() or not 1 <= int(text) <= 20:
            failure(req_id, name, "skill_error", f"countdown needs a whole number from 1 to 20, got {text!r}")
            return
        start = int(text)
        for seq, step in enumerate(range(start, -1, -1)):
            pct = round(100 * (start - step) / start)
            send("skill/event", req_id=req_id, kind="progress", seq=2 * seq, data={"pct": pct, "message": f"{step}..."})
            chunk = base64.b64encode(f"{step}\n".encode()).decode()
            artifact = {"name": "countdown", "mime": "text/plain", "chunk": chunk, "final": step == 0}
            send("skill/event", req_id=req_id, kind="artifact", seq=2 * seq + 1, data=artifact)
            time.sleep(float(arguments.get("interval_s", 0.01)))
        result(req_id, name, started, summary=f"Liftoff! Counted down from {start}.", data={"from": start})
    else:
        send("error", req_id=req_id, code="unknown_skill", message=f"no skill {name!r}", retryable=False)


def main() -> None:
    for line in sys.stdin.buffer:  # bytes: json.loads decodes the UTF-8 itself
        try:
            message = json.loads(line)
        except ValueError:  # not JSON, or not UTF-8
            continue
        kind, req_id = message.get("type"), message.get("id", "")
        if kind == "handshake/req":
            send("handshake/resp", req_id=req_id, session_id=uuid.uuid4().hex, max_parallel=MAX_PARALLEL, ok=True)
        elif kind == "skill/discover/req":
            send("skill/discover/resp", req_id=req_id, skills=SKILLS)
        elif kind == "skill/call/req" and message.get("name") == "echo":
            call(message)  # instant: answered inline, which saves starting a thread
        elif kind == "skill/call/req":
            threading.Thread(target=call, args=(message,), daemon=True).start()
        elif kind == "ping":
            send("pong", req_id=req_id, uptime_seconds=time.monotonic() - _started)
        elif kind == "shutdown":
            break
        elif req_id:
            send("error", req_id=req_id, code="invalid_message", message=f"unknown type {kind!r}")


if __name__ == "__main__":
    main()
