"""Serving one A2A call, whatever the binding it came by (JSON-RPC, HTTP+JSON).

A binding reads its request into an :class:`~gateways.http.rpc.RpcCall` (A2A 0.3 params for the
mesh) and writes the answer its own way; what lies between is the same for every binding and
lives here: the version check, the target agent, the message limits, the timeout, the context
slot, the E2A envelope, forwarding to the mesh and what the gateway answers itself
(``ListTasks``, ``GetExtendedAgentCard``)::

    call = binding's reader
    response = await serve_call(request, read_call, JSON_RPC)   # or REST (gateways.http.rest)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateways.http.a2a_v1 import list_tasks_query, list_tasks_result_v1
from gateways.http.auth import Principal
from gateways.http.edge import asked_version, caller_of
from gateways.http.limits import ConcurrencyLimits, request_timeout
from gateways.http.observability import count_refusal
from gateways.http.protection import EdgeError, agent_not_found, body_too_slow
from gateways.http.rpc import (
    RpcCall,
    Version,
    answer,
    check_version_served,
    envelope_for,
    error_of,
    error_response,
    sse,
    sse_error,
)
from gateways.http.streams import EventStream
from mesh.a2a import AuthenticatedExtendedCardNotConfigured, Method, RpcError, TaskNotFound
from mesh.background import cancel_and_wait
from mesh.e2a import E2AResponse
from mesh.limits import check_message_limits

if TYPE_CHECKING:
    from gateways.http.server import HttpGateway

__all__ = ["JSON_RPC", "Binding", "local_result", "read_body", "serve_call", "target_agent"]


class Binding(Protocol):
    """How one A2A binding writes answers."""

    #: Whether a streaming call's errors are events of its stream (:func:`errors_in_stream`).
    #: JSON-RPC 0.3: a streaming method always answers ``text/event-stream``, an unknown or
    #: finished task included (the 0.3 TCK's ``test_tasks_resubscribe_nonexistent``). JSON-RPC 1.0
    #: and REST: an error known before a subscription's stream starts is a plain error (REST: with
    #: its HTTP status, 404 for an unknown task), as a2a-sdk 1.x's servers answer and the 1.0
    #: TCK's STREAM-SUB-003 asks.
    errors_in_stream: bool

    def result(self, call: RpcCall, result: Any) -> Response:
        """A result the gateway computed itself (``ListTasks``)."""

    def error(self, version: Version, call: RpcCall | None, error: RpcError) -> Response:
        """An error before or instead of the mesh's answer."""

    def unary(self, call: RpcCall, frame: E2AResponse) -> Response:
        """The answer to a unary call: its final frame."""

    def stream(self, call: RpcCall, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:
        """The SSE body of a streaming call."""


class _JsonRpc:
    """A2A JSON-RPC: errors are JSON-RPC errors with HTTP 200, streams of JSON-RPC responses."""

    errors_in_stream = True

    def result(self, call: RpcCall, result: Any) -> Response:
        return JSONResponse({"jsonrpc": "2.0", "id": call.request_id, "result": result})

    def error(self, version: Version, call: RpcCall | None, error: RpcError) -> Response:
        return JSONResponse(error_response(version, error.request_id, error))

    def unary(self, call: RpcCall, frame: E2AResponse) -> Response:
        return JSONResponse(answer(call, frame))

    def stream(self, call: RpcCall, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:
        return sse(call, frames)


JSON_RPC: Binding = _JsonRpc()


def _gateway(request: Request) -> HttpGateway:
    gateway: HttpGateway = request.app.state.gateway
    return gateway


async def serve_call(
    request: Request, read_call: Callable[[], RpcCall], binding: Binding, *, agent_name: str | None = None
) -> Response:
    """Serve one call of a private route: read it, check it, forward it, answer it (to
    ``agent_name``, else the agent the route's path names)."""
    gateway = _gateway(request)
    concurrency: ConcurrencyLimits = request.app.state.concurrency
    principal = caller_of(request)
    call: RpcCall | None = None
    try:
        call = read_call()
        check_version_served(call, gateway.settings.a2a_versions)
        agent = (
            target_agent(gateway, call, principal, agent_name)
            if agent_name is not None
            else _target(gateway, request, call, principal)
        )
        if call.mesh_method is None:
            return binding.result(call, await local_result(gateway, call, principal))
        message = call.params.get("message")
        if message is not None:
            check_message_limits(message, gateway.settings.limits)
            await gateway.artifacts.store_uploads(message, principal.name, call.task_id)
        timeout = request_timeout(request.headers, gateway.settings.timeouts, streaming=call.streaming)
        context_slot = concurrency.contexts.acquire(call.context_id) if call.context_id else None
    except RpcError as exc:
        if exc.request_id is None and call is not None:
            exc.request_id = call.request_id  # the request was read: answer it by its id
        if isinstance(exc, EdgeError):
            raise  # counted where it is answered (edge_refusal)
        count_refusal(request, type(exc).__name__)
        if call is not None and call.streaming and errors_in_stream(binding, call) and isinstance(exc, TaskNotFound):
            # Another caller's task: answered as an unknown one is (on the stream), not told apart.
            keep_alive_s = gateway.settings.sse_keep_alive_s
            return EventStream(_one_error(call, exc), request.app.state.streams, None, keep_alive_s=keep_alive_s)
        return binding.error(call.version if call is not None else asked_version(request), call, exc)
    envelope = envelope_for(call, user_id=principal.name)
    frames = gateway.runtime.forward(envelope, agent, deadline_s=timeout, owner=principal.name)
    frames = gateway.artifacts.rewrite(frames, gateway.public_url, principal.name)
    if call.streaming:
        # REST: a subscription's errors are known at once (the task is finished, unknown,
        # another's): wait for its first frame, to answer one as a plain error. A new stream
        # starts at once: the client may leave before anything is sent, and nothing then
        # reaches the mesh. JSON-RPC 0.3 streams every error (errors_in_stream).
        if call.mesh_method is Method.tasks_resubscribe and not errors_in_stream(binding, call):
            first = await _first_frame(frames)
            if isinstance(first, E2AResponse) and first.is_final and first.response_kind == "e2a.error":
                # A plain error (REST: its HTTP status), not an HTTP 200 stream holding one event.
                if context_slot is not None:
                    context_slot.release()
                await frames.aclose()  # type: ignore[attr-defined]
                error = error_of(first)
                error.request_id = call.request_id
                return binding.error(call.version, call, error)
            frames = _prepended(first, frames)
        keep_alive_s = gateway.settings.sse_keep_alive_s
        chunks = binding.stream(call, frames)
        return EventStream(chunks, request.app.state.streams, context_slot, keep_alive_s=keep_alive_s)
    try:
        async for frame in frames:
            if frame.is_final:
                return binding.unary(call, frame)
    finally:
        if context_slot is not None:
            context_slot.release()
        await frames.aclose()  # type: ignore[attr-defined]
    raise AssertionError("the runtime ended a request without a final frame")  # pragma: no cover


def errors_in_stream(binding: Binding, call: RpcCall) -> bool:
    """Whether ``call``'s errors are answered on its stream (see :attr:`Binding.errors_in_stream`)."""
    return binding.errors_in_stream and call.version == "0.3"


async def _one_error(call: RpcCall, error: RpcError) -> AsyncIterator[bytes]:
    """A JSON-RPC stream holding one ``error`` event."""
    yield sse_error(call, error)


#: How long a stream waits for the mesh's first frame before it starts: an agent answers an error
#: it knows at once (a finished task), so that comes as a plain error; a slow agent's stream starts
#: (and gets its keep-alives) after this.
FIRST_FRAME_WAIT_S = 1.0


async def _first_frame(frames: AsyncIterator[E2AResponse]) -> E2AResponse | asyncio.Task[E2AResponse] | None:
    """The first frame if it comes within :data:`FIRST_FRAME_WAIT_S`, else the task still
    waiting for it (the stream awaits it), or None for no frame at all."""
    waiting = asyncio.ensure_future(anext(frames))
    done, _ = await asyncio.wait({waiting}, timeout=FIRST_FRAME_WAIT_S)
    if not done:
        return waiting
    try:
        return waiting.result()
    except StopAsyncIteration:
        return None


async def _prepended(
    first: E2AResponse | asyncio.Task[E2AResponse] | None, frames: AsyncIterator[E2AResponse]
) -> AsyncIterator[E2AResponse]:
    """``frames`` with the one already read (or being read) in front; closes ``frames``."""
    try:
        if isinstance(first, asyncio.Task):
            try:
                first = await first
            except StopAsyncIteration:
                return
        if first is not None:
            yield first
            async for frame in frames:
                yield frame
    finally:
        if isinstance(first, asyncio.Task) and not first.done():
            await cancel_and_wait(first)  # the client left before the first frame
        await frames.aclose()  # type: ignore[attr-defined]


async def read_body(request: Request, timeout_s: float) -> bytes:
    """The whole body, due within ``timeout_s`` (408 after: a slow body holds a request slot);
    PrivateRoute refuses one over the size limit as it comes."""
    try:
        async with asyncio.timeout(timeout_s):  # asyncio's: half the cost of anyio's cancel scope
            return await request.body()
    except TimeoutError:
        raise body_too_slow(timeout_s) from None


def _target(gateway: HttpGateway, request: Request, call: RpcCall, principal: Principal) -> str:
    name = request.path_params.get("name")
    return target_agent(gateway, call, principal, None if name is None else str(name))


def target_agent(gateway: HttpGateway, call: RpcCall, principal: Principal, named: str | None) -> str:
    """The agent a call goes to: the one it names (path, gRPC tenant), else its task's, else the
    default agent; a task of another caller is not found."""
    route = gateway.runtime.task_route(call.task_id) if call.task_id else None
    if route is not None and route.owner not in (None, principal.name):
        raise TaskNotFound(f"no task {call.task_id!r}", data={"taskId": call.task_id}, request_id=call.request_id)
    if named:
        if gateway.runtime.agent(named) is None:  # 404, as the card routes answer it
            raise agent_not_found(named, gateway.runtime.agent_names())
        return named
    if route is not None:
        return route.agent
    if gateway.settings.default_agent is None:
        available = gateway.runtime.agent_names()
        raise EdgeError(
            f"this gateway has no default agent: POST to /a2a/agents/{{name}} instead "
            f"(agents: {', '.join(available) or 'none'})",
            code=-32000,
            error_type="AgentNotFound",
            http_status=404,
            details={"availableAgents": available},
        )
    return gateway.settings.default_agent


async def local_result(gateway: HttpGateway, call: RpcCall, principal: Principal) -> Any:
    """The result of a 1.0 method the mesh has no counterpart for."""
    if call.method == "ListTasks":
        query = list_tasks_query(call.params)
        await gateway.runtime.refresh_tasks(principal.name)
        tasks = [r.task for r in gateway.runtime.task_routes() if r.owner == principal.name and r.task is not None]
        return list_tasks_result_v1(query, tasks)
    raise AuthenticatedExtendedCardNotConfigured("this gateway serves no extended agent cards")
