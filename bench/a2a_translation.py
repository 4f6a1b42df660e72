"""A2A 0.3 -> 1.0 translation of an answer at the gateway edge: ours against a2a-sdk's compat.

The gateway turns every answer of a mesh agent (A2A 0.3 JSON) into A2A 1.0 JSON for its 1.0
clients. Two ways to do it, per completed Task with a two-message history, from the JSON bytes
the mesh delivers to the 1.0 JSON the client gets:

- ours: ``json.loads`` then :func:`mesh.profile.v1.task_v1` (dict to dict);
- a2a-sdk: its 0.3 pydantic ``Task`` from the bytes, ``conversions.to_core_task`` (the 1.0
  protobuf), then ``MessageToDict``.

Last line on stdout: ``{"ours_us": ..., "a2a_sdk_us": ..., "ratio": ...}`` (microseconds per Task).
No broker: a pure CPU measurement. Run: ``python bench/a2a_translation.py``.
"""

from __future__ import annotations

import json
import sys
import timeit
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2a.compat.v0_3 import conversions, types
from google.protobuf.json_format import MessageToDict

from bench.harness import emit, progress, ratio
from mesh.profile.v1 import task_v1


def _message(role: str, message_id: str) -> dict[str, Any]:
    return {"kind": "message", "role": role, "messageId": message_id, "parts": [{"kind": "text", "text": "hello"}]}


TASK = json.dumps(
    {
        "kind": "task",
        "id": uuid.uuid4().hex,
        "contextId": uuid.uuid4().hex,
        "status": {"state": "completed", "timestamp": "2026-11-24T12:00:00.123Z", "message": _message("agent", "m2")},
        "history": [_message("user", "m1"), _message("agent", "m2")],
        "artifacts": [],
    }
).encode()


def ours() -> dict[str, Any]:
    return task_v1(json.loads(TASK))


def a2a_sdk() -> dict[str, Any]:
    return MessageToDict(conversions.to_core_task(types.Task.model_validate_json(TASK)))


def per_call_us(fn: Any, number: int = 5000) -> float:
    return round(min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6, 2)


def main() -> None:
    assert ours() == a2a_sdk(), "the two translations disagree"
    mine, theirs = per_call_us(ours), per_call_us(a2a_sdk)
    progress(f"ours {mine} us, a2a-sdk compat {theirs} us per Task")
    emit({"ours_us": mine, "a2a_sdk_us": theirs, "ratio": ratio(mine, theirs)})


if __name__ == "__main__":
    main()
