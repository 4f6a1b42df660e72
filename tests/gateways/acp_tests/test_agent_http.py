"""An ACP agent served on the mesh, reached through the HTTP gateway (A2A JSON-RPC and SSE)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.agents.acp_agents import coder
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.gateways.jsonrpc_http import call, message, result_of, rpc, sse_events, stream_events


def reply_text(task: dict) -> str:  # type: ignore[type-arg]
    return "".join(p.get("text", "") for p in task["status"]["message"]["parts"])


async def test_send_and_the_policy_answering_a_permission_request(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    await serve_agent(coder(tmp_path))
    gateway = await start_gateway(default_agent="coder")
    url = f"{gateway.public_url}/a2a/agents/coder"
    task = result_of(await call(http, url, "message/send", {"message": message("echo over http")}))
    assert (task["status"]["state"], reply_text(task)) == ("completed", "over http")
    allowed = result_of(await call(http, url, "message/send", {"message": message("permission search")}))
    refused = result_of(await call(http, url, "message/send", {"message": message("permission delete")}))
    assert (reply_text(allowed), reply_text(refused)) == ("yes", "no")


async def test_stream_shows_the_tool_calls_as_data_parts(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    await serve_agent(coder(tmp_path))
    gateway = await start_gateway(default_agent="coder")
    response, events = await stream_events(
        http, f"{gateway.public_url}/a2a/agents/coder", "message/stream", {"message": message("echo streamed")}
    )
    assert response.status_code == 200
    results = [data["result"] for _, data in events]
    tools = [
        part["data"]["toolCall"]
        for r in results
        if r["kind"] == "status-update" and r["status"].get("message")
        for part in r["status"]["message"]["parts"]
        if part["kind"] == "data"
    ]
    assert [(t["toolCallId"], t["status"]) for t in tools] == [("t1", "pending"), ("t1", "completed")]
    chunks = [
        part["text"]
        for r in results
        if r["kind"] == "status-update" and r["status"]["state"] == "working" and r["status"].get("message")
        for part in r["status"]["message"]["parts"]
        if part["kind"] == "text"
    ]
    assert "".join(chunks) == "streamed"
    assert results[-1]["status"]["state"] == "completed" and reply_text(results[-1]) == "streamed"


async def test_cancel_over_http_cancels_the_acp_turn(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    await serve_agent(coder(tmp_path))
    gateway = await start_gateway(default_agent="coder")
    url = f"{gateway.public_url}/a2a/agents/coder"
    body = rpc("message/stream", {"message": message("slow 400", contextId="ctx-http")}, request_id="s")
    async with http.stream("POST", url, json=body) as response:
        async for _, data in sse_events(response):
            if data["result"]["kind"] == "status-update":
                task_id = data["result"]["taskId"]
                break
    canceled = result_of(await call(http, url, "tasks/cancel", {"id": task_id}, request_id="c"), "c")
    assert canceled["status"]["state"] == "canceled"
    # The context's next prompt waits for the canceled turn to end on the ACP agent.
    after = result_of(await call(http, url, "message/send", {"message": message("count", contextId="ctx-http")}))
    assert reply_text(after) == "2"
    assert (tmp_path / "marker").read_text() == "cancelled"


async def test_a_crash_of_the_acp_process_fails_the_task_at_once(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    await serve_agent(coder(tmp_path))
    gateway = await start_gateway(default_agent="coder")
    url = f"{gateway.public_url}/a2a/agents/coder"
    crashed = result_of(await call(http, url, "message/send", {"message": message("crash")}))
    assert crashed["status"]["state"] == "failed" and "exited with status 3" in reply_text(crashed)
    again = result_of(await call(http, url, "message/send", {"message": message("echo alive")}))
    assert reply_text(again) == "alive"
