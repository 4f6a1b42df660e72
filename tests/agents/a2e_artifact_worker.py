"""An A2E worker (standard library only) that saves and loads artifacts through the mesh.

Skill ``roundtrip``: writes ``size`` random bytes to a file, asks the mesh to save it
(``artifact/save/req`` by path), loads it back to another path (``artifact/load/req``), saves a
small one inline (``data``), tries a hostile name, and answers with what it saw.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import tempfile
import time
import uuid
from typing import Any


def send(type_: str, **fields: Any) -> str:
    message_id = uuid.uuid4().hex
    message = {"type": type_, "id": message_id, "version": "1.0", "ts": time.time(), **fields}
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
    return message_id


def wait_answer(request_id: str) -> dict[str, Any]:
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("req_id") == request_id:
            return dict(message)
    raise SystemExit("stdin closed")


def roundtrip(request: dict[str, Any]) -> None:
    size = int(request.get("arguments", {}).get("text", "3000000"))
    work = tempfile.mkdtemp(prefix="a2e-artifacts-")
    source = os.path.join(work, "made.bin")
    with open(source, "wb") as out:
        out.write(os.urandom(size))
    with open(source, "rb") as made:
        digest = hashlib.sha256(made.read()).hexdigest()
    call_id = request["id"]
    saved = wait_answer(
        send("artifact/save/req", call_id=call_id, name="made.bin", mime="application/x-made", path=source)
    )
    target = os.path.join(work, "loaded.bin")
    loaded = wait_answer(send("artifact/load/req", call_id=call_id, uri=saved["uri"], path=target))
    with open(target, "rb") as back:
        same = hashlib.sha256(back.read()).hexdigest() == digest
    small = base64.b64encode(b"tiny").decode()
    inline = wait_answer(send("artifact/save/req", call_id=call_id, name="tiny.txt", mime="text/plain", data=small))
    inline_back = wait_answer(send("artifact/load/req", call_id=call_id, uri=inline["uri"]))
    hostile = wait_answer(send("artifact/save/req", call_id=call_id, name="../escape", data=small))
    summary = {
        "uri": saved["uri"],
        "size": saved["size"],
        "version": saved["artifact_version"],
        "loaded_same": same,
        "loaded_mime": loaded["mime"],
        "inline_back": base64.b64decode(inline_back["data"]).decode(),
        "hostile_error": hostile["error"]["message"],
    }
    data = {"success": True, "duration_ms": 1, "summary": json.dumps(summary)}
    send("skill/call/resp", req_id=call_id, name="roundtrip", data=data)


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        kind, req_id = message.get("type"), message.get("id", "")
        if kind == "handshake/req":
            send("handshake/resp", req_id=req_id, session_id="s", max_parallel=1, ok=True)
        elif kind == "skill/discover/req":
            send("skill/discover/resp", req_id=req_id, skills=[{"name": "roundtrip", "description": "artifacts"}])
        elif kind == "skill/call/req":
            roundtrip(message)
        elif kind == "shutdown":
            break


if __name__ == "__main__":
    main()
