"""A misbehaving A2E worker for the tests (standard library only), steered by its environment.

Skills: ``echo``; ``fail`` (the skill fails); ``flaky`` (the first call of each
correlation_id answers a retryable error); ``crash`` (one progress event, a huge stderr line and a short
one, exit 3); ``slow`` (answers after ``seconds``, with the most calls it ever had in flight);
``stall`` (stops reading stdin and answering, pings included); ``cancels`` (the req_ids of
the ``skill/cancel`` messages it got).

Environment: ``MAX_PARALLEL``; ``REFUSE=reason`` refuses the handshake; ``GARBAGE=1`` writes
bad lines (not JSON, an array, a long line) before each answer; ``ONCE=path`` starts only if
``path`` does not exist yet (it creates it), else exits 1; ``CANCEL_CAP=1`` accepts ``cancel``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from typing import Any

_out = threading.Lock()
_lock = threading.Lock()
_state: dict[str, Any] = {"in_flight": 0, "max_in_flight": 0, "seen": set(), "cancels": []}


def send(type_: str, **fields: Any) -> None:
    line = json.dumps({"type": type_, "id": uuid.uuid4().hex, "version": "1.0", "ts": time.time(), **fields})
    with _out:
        if os.environ.get("GARBAGE"):
            sys.stdout.write("this is not json\n[1, 2, 3]\n" + "x" * 5000 + "\n")
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def answer(request: dict[str, Any], **data: Any) -> None:
    send(
        "skill/call/resp", req_id=request["id"], name=request["name"], data={"success": True, "duration_ms": 1, **data}
    )


def call(request: dict[str, Any]) -> None:
    name, arguments = request["name"], request.get("arguments") or {}
    if name == "echo":
        answer(request, summary=arguments.get("text", ""))
    elif name == "fail":
        data = {"success": False, "duration_ms": 1, "error": "the input is upside down", "error_code": "skill_error"}
        send("skill/call/resp", req_id=request["id"], name=name, data=data)
    elif name == "flaky":
        key = request.get("correlation_id")
        with _lock:
            first = key not in _state["seen"]
            _state["seen"].add(key)
        if first:
            send("error", req_id=request["id"], code="runtime_error", message="busy, try again", retryable=True)
        else:
            answer(request, summary="worked the second time")
    elif name == "crash":
        send("skill/event", req_id=request["id"], kind="progress", seq=0, data={"pct": 10, "message": "starting"})
        sys.stderr.write("x" * 100_000 + "\n")  # a huge line must not stop the stderr reading
        sys.stderr.write("fatal: the flux capacitor broke\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "slow":
        with _lock:
            _state["in_flight"] += 1
            _state["max_in_flight"] = max(_state["max_in_flight"], _state["in_flight"])
        send("skill/event", req_id=request["id"], kind="status", seq=0, data={"message": "sleeping"})
        time.sleep(float(arguments.get("seconds", arguments.get("text") or 0.3)))
        with _lock:
            _state["in_flight"] -= 1
        answer(request, summary="slept", data={"max_in_flight": _state["max_in_flight"]})
    elif name == "cancels":
        answer(request, data={"cancels": list(_state["cancels"])})
    else:
        send("error", req_id=request["id"], code="unknown_skill", message=f"no skill {name!r}")


def main() -> None:
    once = os.environ.get("ONCE")
    if once:
        if os.path.exists(once):
            sys.stderr.write("cannot start twice\n")
            sys.exit(1)
        open(once, "w").close()
    skills = [{"name": n, "description": f"the {n} skill"} for n in ("echo", "fail", "flaky", "crash", "slow", "stall")]
    skills.append({"name": "cancels", "description": "the cancels received"})
    for line in sys.stdin:
        message = json.loads(line)
        kind, req_id = message["type"], message["id"]
        if kind == "handshake/req":
            refuse = os.environ.get("REFUSE")
            if refuse:
                sys.stderr.write("refusing: " + refuse + "\n")
                sys.stderr.flush()
            caps = [{"capability": "cancel"}] if os.environ.get("CANCEL_CAP") else []
            max_parallel = int(os.environ.get("MAX_PARALLEL", "4"))
            send(
                "handshake/resp",
                req_id=req_id,
                ok=not refuse,
                reason=refuse or "",
                max_parallel=max_parallel,
                accepted_caps=caps,
            )
        elif kind == "skill/discover/req":
            send("skill/discover/resp", req_id=req_id, skills=skills)
        elif kind == "skill/call/req" and message["name"] == "stall":
            time.sleep(3600)  # stops reading and answering: only the ping notices
        elif kind == "skill/call/req":
            threading.Thread(target=call, args=(message,), daemon=True).start()
        elif kind == "skill/cancel":
            _state["cancels"].append(message["req_id"])
        elif kind == "ping":
            send("pong", req_id=req_id, uptime_seconds=1.0)
        elif kind == "shutdown":
            return


if __name__ == "__main__":
    main()
