"""A real remote A2A agent for the proxy's tests: the a2a-sdk 1.3 server on uvicorn.

It serves JSON-RPC (A2A 1.0 and 0.3 on one URL, ``/``), HTTP+JSON (``/rest``, also 0.3), its
card at ``/.well-known/agent-card.json`` listing all three, and, with ``tokens=True``, an OAuth 2
client-credentials token endpoint (``/token``) whose tokens every A2A route demands. What the
agent does depends on the text it gets:

- ``ask``: input-required ("Which city?"), then completes with ``weather in <answer>``;
- ``slow``: works until canceled;
- ``file <n>``: an artifact of one inline file of ``n`` bytes, then completes;
- ``hold``: waits for a release (``passes``; ``in_flight`` and ``peak`` count them), then completes;
- ``steps``: three status updates and a two-chunk text artifact, then completes;
- anything else: completes with ``echo: <text>``.

``/moved`` redirects to the card (the redirect checks).

    python -m tests.agents.remote.server PORT      # prints "ready" once it listens
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, Task, TaskState, TaskStatus
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

CLIENT_ID = "mesh-proxy"
CLIENT_SECRET = "s3cret-client"  # a test credential of this test server only


class Weather(AgentExecutor):
    async def execute(self, ctx: RequestContext, queue: EventQueue) -> None:
        text = ctx.get_user_input().strip()
        self.arrivals.append(time.monotonic())
        self.received.append(text)
        self.changed.set()
        updater = TaskUpdater(queue, ctx.task_id or "", ctx.context_id or "")
        if ctx.current_task is None:
            await queue.enqueue_event(
                Task(
                    id=ctx.task_id,
                    context_id=ctx.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[ctx.message],
                )
            )
        elif ctx.current_task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.complete(message=updater.new_agent_message([Part(text=f"weather in {text}: sunny")]))
            return
        await updater.start_work()
        if text == "ask":
            await updater.requires_input(message=updater.new_agent_message([Part(text="Which city?")]))
        elif text == "slow":
            await asyncio.Event().wait()  # until canceled
        elif text == "hold":
            await self._held()
            await updater.complete(message=updater.new_agent_message([Part(text="released")]))
        elif text.startswith("file "):
            size = int(text.split()[1])
            await updater.add_artifact(
                [Part(raw=b"x" * size, media_type="application/octet-stream", filename="big.bin")], name="big.bin"
            )
            await updater.complete(message=updater.new_agent_message([Part(text=f"{size} bytes")]))
        elif text == "steps":
            for step in ("one", "two", "three"):
                await updater.update_status(TaskState.TASK_STATE_WORKING, updater.new_agent_message([Part(text=step)]))
            await updater.add_artifact([Part(text="first ")], artifact_id="notes", name="notes", last_chunk=False)
            await updater.add_artifact([Part(text="second")], artifact_id="notes", append=True, last_chunk=True)
            await updater.complete(message=updater.new_agent_message([Part(text="done")]))
        else:
            await updater.complete(message=updater.new_agent_message([Part(text=f"echo: {text}")]))

    async def cancel(self, ctx: RequestContext, queue: EventQueue) -> None:
        self.canceled.append(ctx.task_id or "")
        await TaskUpdater(queue, ctx.task_id or "", ctx.context_id or "").cancel()

    async def _held(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.changed.set()
        try:
            await self.passes.acquire()
        finally:
            self.in_flight -= 1
            self.changed.set()

    def __init__(self) -> None:
        self.canceled: list[str] = []
        self.received: list[str] = []
        self.arrivals: list[float] = []  # time.monotonic() of each message received
        self.changed = asyncio.Event()  # set at each message received (tests wait on it)
        self.passes = asyncio.Semaphore(0)  # one release lets one ``hold`` go on
        self.in_flight = self.peak = 0  # ``hold`` calls held now, and the most at once


@dataclass
class Tokens:
    """The token endpoint's state: tokens handed out, which are valid, how many requests needed one."""

    valid: set[str] = field(default_factory=set)
    issued: int = 0
    refused: int = 0

    def expire_all(self) -> None:
        self.valid.clear()


def card(port: int, *, legacy: bool = False, grpc_port: int | None = None) -> AgentCard:
    """The agent's card; ``legacy``: only the A2A 0.3 JSON-RPC interface (a server not yet on 1.0)."""
    base = f"http://127.0.0.1:{port}"
    if legacy:
        interfaces = [AgentInterface(protocol_binding="JSONRPC", protocol_version="0.3", url=f"{base}/")]
    else:
        interfaces = [
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=f"{base}/"),
            AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=f"{base}/rest"),
            AgentInterface(protocol_binding="JSONRPC", protocol_version="0.3", url=f"{base}/"),
        ]
    if grpc_port is not None:
        interfaces.append(AgentInterface(protocol_binding="GRPC", protocol_version="1.0", url=f"127.0.0.1:{grpc_port}"))
    return AgentCard(
        name="weather",
        description="Tells the weather",
        version="2.1.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="weather", name="Weather", description="The weather in a city", tags=["weather"])],
        supported_interfaces=interfaces,
    )


def handler_for(executor: Weather, the_card: AgentCard) -> DefaultRequestHandler:
    return DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=the_card)


def app(
    port: int,
    executor: Weather,
    tokens: Tokens | None = None,
    agent_card: AgentCard | None = None,
    handler: DefaultRequestHandler | None = None,
) -> Starlette:
    the_card = agent_card or card(port)
    handler = handler or handler_for(executor, the_card)
    routes = [
        Route("/moved", lambda _: RedirectResponse("/.well-known/agent-card.json", status_code=307)),
        *create_agent_card_routes(the_card),
        *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True),
        *create_rest_routes(handler, enable_v0_3_compat=True, path_prefix="/rest"),
    ]
    if tokens is None:
        return Starlette(routes=routes)

    async def token(request: Request) -> Response:
        form = await request.form()
        basic = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if form.get("grant_type") != "client_credentials" or request.headers.get("authorization") != f"Basic {basic}":
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        value = secrets.token_urlsafe(16)
        tokens.valid.add(value)
        tokens.issued += 1
        return JSONResponse({"access_token": value, "token_type": "Bearer", "expires_in": 3600})

    class RequireToken(BaseHTTPMiddleware):
        async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
            if request.url.path in ("/token", "/.well-known/agent-card.json"):
                return await call_next(request)
            header = request.headers.get("authorization", "")
            if header.removeprefix("Bearer ") not in tokens.valid:
                tokens.refused += 1
                return JSONResponse({"error": "invalid_token"}, status_code=401)
            return await call_next(request)

    server = Starlette(routes=[Route("/token", token, methods=["POST"]), *routes])
    server.add_middleware(RequireToken)
    return server


@contextlib.asynccontextmanager
async def serving(application: Starlette, port: int) -> AsyncIterator[uvicorn.Server]:
    """``application`` on 127.0.0.1:``port`` in this loop until the block ends (the remote "dies")."""
    config = uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:  # uvicorn has no started event or hook; it flips the flag once bound
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield server
    finally:
        server.should_exit = True
        server.force_exit = True
        await task


@contextlib.asynccontextmanager
async def serving_grpc(
    handler: DefaultRequestHandler, port: int, admits: Callable[[dict[str, str]], bool] | None = None
) -> AsyncIterator[None]:
    """The same agent over gRPC (the a2a-sdk's GrpcHandler on grpc.aio) on 127.0.0.1:``port``;
    with ``admits``, a call whose metadata it refuses ends ``UNAUTHENTICATED`` before the agent."""
    import grpc
    from a2a.server.request_handlers import GrpcHandler
    from a2a.types import a2a_pb2_grpc

    interceptors = [_grpc_guard(admits)] if admits is not None else None
    server = grpc.aio.server(interceptors=interceptors)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    try:
        yield
    finally:
        await server.stop(0)


def _grpc_guard(admits: Callable[[dict[str, str]], bool]) -> Any:
    import grpc

    async def refuse_unary(request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong credentials")

    async def refuse_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong credentials")
        yield  # an async generator, as a server-streaming method is

    class Guard(grpc.aio.ServerInterceptor):  # type: ignore[misc]
        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            served = await continuation(details)
            if served is None or admits({key: value for key, value in details.invocation_metadata}):
                return served
            refuse, make = (
                (refuse_stream, grpc.unary_stream_rpc_method_handler)
                if served.response_streaming
                else (refuse_unary, grpc.unary_unary_rpc_method_handler)
            )
            return make(refuse, served.request_deserializer, served.response_serializer)

    return Guard()


async def main(port: int) -> None:
    async with serving(app(port, Weather()), port):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
