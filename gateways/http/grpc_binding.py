"""The gRPC binding of A2A 1.0 at the gateway (the ``grpc`` extra: grpcio, and a2a-sdk for the
compiled ``lf.a2a.v1`` service), translated to the mesh like JSON-RPC.

One gRPC server per gateway (``grpc_port``); a request's ``tenant`` names the agent (each
agent's card lists the gRPC interface with its name as tenant), an empty tenant the default
agent. Requests are read as the ProtoJSON of their message into the same
:class:`~gateways.http.rpc.RpcCall` as JSON-RPC and REST; answers are the 1.0 JSON read back
into the response message. As on the other bindings, an inline file above the threshold is
stored and sent on as its ``artifact://`` URI, and every ``artifact://`` URI of an answer
becomes the caller's signed download link (:mod:`gateways.http.artifacts`). Credentials come
in the metadata (``authorization``, ``x-api-key``), as HTTP headers do. Errors abort the call
with the gRPC code of the A2A error and a ``google.rpc.Status`` holding its ``ErrorInfo`` in
``grpc-status-details-bin``, which a2a-sdk's client maps back to its error types. The HTTP
edge's rate and concurrency limits are not applied to gRPC (yet).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Final, NoReturn

import grpc
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc
from google.protobuf import any_pb2, empty_pb2, json_format
from google.protobuf.message import Message as Proto
from google.rpc import error_details_pb2, status_pb2

from gateways.http.a2a_v1 import StreamToV1, error_v1, result_v1
from gateways.http.auth import Authenticator, Principal
from gateways.http.rest_errors import status_of
from gateways.http.rpc import (
    RpcCall,
    call_v1_of_version,
    envelope_for,
    error_of,
    jaf_reason,
    result_of,
    standard_error,
)
from gateways.http.serving import local_result, target_agent
from mesh.a2a import RpcError
from mesh.limits import check_message_limits

if TYPE_CHECKING:
    from gateways.http.server import HttpGateway

__all__ = ["GrpcServer", "grpc_code"]

#: HTTP status (of the REST mapping) -> gRPC status code.
#: A2A errors whose gRPC status is UNIMPLEMENTED: -32003 PushNotificationNotSupported, -32004
#: UnsupportedOperation, -32009 VersionNotSupported, as A2A 1.0.0's table (section 5.4) and the
#: 1.0 TCK (GRPC-ERR-002) say. A2A 1.0.1 moved them to FAILED_PRECONDITION (which REST's
#: google.rpc status keeps); clients tell the error by the ErrorInfo reason, on which both agree.
_UNIMPLEMENTED_ERRORS: Final = frozenset({-32003, -32004, -32009})
_CODES: Final[dict[str, grpc.StatusCode]] = {
    "INVALID_ARGUMENT": grpc.StatusCode.INVALID_ARGUMENT,
    "NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "FAILED_PRECONDITION": grpc.StatusCode.FAILED_PRECONDITION,
    "INTERNAL": grpc.StatusCode.INTERNAL,
    "UNAVAILABLE": grpc.StatusCode.UNAVAILABLE,
    "DEADLINE_EXCEEDED": grpc.StatusCode.DEADLINE_EXCEEDED,
    "UNAUTHENTICATED": grpc.StatusCode.UNAUTHENTICATED,
    "RESOURCE_EXHAUSTED": grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def grpc_code(error: RpcError) -> grpc.StatusCode:
    """The gRPC status of ``error``."""
    if error.code in _UNIMPLEMENTED_ERRORS:
        return grpc.StatusCode.UNIMPLEMENTED
    return _CODES.get(status_of(error)[1], grpc.StatusCode.UNKNOWN)


async def _abort(context: grpc.aio.ServicerContext[Any, Any], error: RpcError) -> NoReturn:
    obj = error.error
    message, data = standard_error(obj.code, obj.message, obj.data)
    code = grpc_code(error)
    status = status_pb2.Status(code=code.value[0], message=message)
    for detail in error_v1(obj.code, message, data, reason=jaf_reason(error)).get("data", []):
        if detail.get("@type", "").endswith("google.rpc.ErrorInfo"):
            info = error_details_pb2.ErrorInfo(
                reason=detail["reason"], domain=detail["domain"], metadata=detail.get("metadata", {})
            )
            packed = any_pb2.Any()
            packed.Pack(info)
            status.details.append(packed)
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    await context.abort(code, message)
    raise AssertionError("abort returns only by raising")  # pragma: no cover


def _metadata(context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str]:
    """The call's metadata (gRPC keys are lower case), as HTTP headers are read."""
    return {key.lower(): value for key, value in context.invocation_metadata() or () if isinstance(value, str)}


class _Service(a2a_pb2_grpc.A2AServiceServicer):
    def __init__(self, gateway: HttpGateway) -> None:
        self.gateway = gateway
        self.authenticator = Authenticator(gateway.settings.auth)

    # ------------------------------------------------------------ the call path

    def _principal(self, context: grpc.aio.ServicerContext[Any, Any]) -> Principal:
        return self.authenticator.authenticate(_metadata(context))

    def _read(self, method: str, request: Proto, context: grpc.aio.ServicerContext[Any, Any]) -> tuple[RpcCall, str]:
        params = json_format.MessageToDict(request)
        tenant = str(params.pop("tenant", ""))
        return call_v1_of_version(method, params, _metadata(context).get("a2a-version")), tenant

    async def _unary(self, method: str, request: Proto, context: Any, reply: type[Proto]) -> Proto:
        """One unary call; a ``null`` result (DeleteTaskPushNotificationConfig) is ``Empty``."""
        try:
            principal = self._principal(context)
            call, tenant = self._read(method, request, context)
            agent = target_agent(self.gateway, call, principal, tenant or None)
            if call.mesh_method is None:
                result = await local_result(self.gateway, call, principal)
            else:
                result = await self._forward(call, agent, principal)
            if result is None:
                return empty_pb2.Empty()
            return json_format.ParseDict(result, reply(), ignore_unknown_fields=True)
        except RpcError as exc:
            await _abort(context, exc)

    async def _forward(self, call: RpcCall, agent: str, principal: Principal) -> Any:
        gateway = self.gateway
        await self._check_message(call, principal)
        envelope = envelope_for(call, user_id=principal.name, channel="grpc")
        frames = gateway.runtime.forward(
            envelope, agent, deadline_s=gateway.settings.timeouts.default_s, owner=principal.name
        )
        frames = gateway.artifacts.rewrite(frames, gateway.public_url, principal.name)
        try:
            async for frame in frames:
                if frame.is_final:
                    return result_v1(call.method, result_of(frame))
        finally:
            await frames.aclose()  # type: ignore[attr-defined]
        raise AssertionError("the runtime ended a request without a final frame")  # pragma: no cover

    async def _check_message(self, call: RpcCall, principal: Principal) -> None:
        """The message's limits; its inline files above the threshold stored (by URI from here)."""
        message = call.params.get("message")
        if message is not None:
            check_message_limits(message, self.gateway.settings.limits)
            await self.gateway.artifacts.store_uploads(message, principal.name, call.task_id)

    async def _stream(self, method: str, request: Proto, context: Any) -> AsyncIterator[pb.StreamResponse]:
        try:
            principal = self._principal(context)
            call, tenant = self._read(method, request, context)
            agent = target_agent(self.gateway, call, principal, tenant or None)
            await self._check_message(call, principal)
        except RpcError as exc:
            await _abort(context, exc)
        gateway = self.gateway
        envelope = envelope_for(call, user_id=principal.name, channel="grpc")
        deadline = gateway.settings.timeouts.streaming_s
        frames = gateway.runtime.forward(envelope, agent, deadline_s=deadline, owner=principal.name)
        frames = gateway.artifacts.rewrite(frames, gateway.public_url, principal.name)
        v1 = StreamToV1(until_terminal=method == "SubscribeToTask")
        try:
            async for frame in frames:
                if v1.closed:
                    continue  # read to the final frame (the response log), send nothing more
                if frame.response_kind == "e2a.error":
                    await _abort(context, error_of(frame))
                item = frame.body["payload"] if frame.response_kind == "a2a.stream_event" else result_of(frame)
                try:
                    responses = v1.feed(item)
                except RpcError as exc:
                    await _abort(context, exc)
                for response in responses:
                    yield json_format.ParseDict(response, pb.StreamResponse(), ignore_unknown_fields=True)
        finally:
            await frames.aclose()  # type: ignore[attr-defined]

    # ------------------------------------------------------------ the A2A service

    async def SendMessage(self, request: Proto, context: Any) -> Proto:
        return await self._unary("SendMessage", request, context, pb.SendMessageResponse)

    async def SendStreamingMessage(self, request: Proto, context: Any) -> AsyncIterator[pb.StreamResponse]:
        async for response in self._stream("SendStreamingMessage", request, context):
            yield response

    async def GetTask(self, request: Proto, context: Any) -> Proto:
        return await self._unary("GetTask", request, context, pb.Task)

    async def ListTasks(self, request: Proto, context: Any) -> Proto:
        return await self._unary("ListTasks", request, context, pb.ListTasksResponse)

    async def CancelTask(self, request: Proto, context: Any) -> Proto:
        return await self._unary("CancelTask", request, context, pb.Task)

    async def SubscribeToTask(self, request: Proto, context: Any) -> AsyncIterator[pb.StreamResponse]:
        async for response in self._stream("SubscribeToTask", request, context):
            yield response

    async def CreateTaskPushNotificationConfig(self, request: Proto, context: Any) -> Proto:
        return await self._unary("CreateTaskPushNotificationConfig", request, context, pb.TaskPushNotificationConfig)

    async def GetTaskPushNotificationConfig(self, request: Proto, context: Any) -> Proto:
        return await self._unary("GetTaskPushNotificationConfig", request, context, pb.TaskPushNotificationConfig)

    async def ListTaskPushNotificationConfigs(self, request: Proto, context: Any) -> Proto:
        reply = pb.ListTaskPushNotificationConfigsResponse
        return await self._unary("ListTaskPushNotificationConfigs", request, context, reply)

    async def DeleteTaskPushNotificationConfig(self, request: Proto, context: Any) -> Proto:
        return await self._unary("DeleteTaskPushNotificationConfig", request, context, empty_pb2.Empty)

    async def GetExtendedAgentCard(self, request: Proto, context: Any) -> Proto:
        return await self._unary("GetExtendedAgentCard", request, context, pb.AgentCard)


class GrpcServer:
    """The gateway's gRPC server: started and stopped with the gateway."""

    def __init__(self, gateway: HttpGateway) -> None:
        self.gateway = gateway
        self.port = 0
        self._server: grpc.aio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(_Service(self.gateway), server)  # type: ignore[no-untyped-call]
        self.port = server.add_insecure_port(f"{host}:{port}")
        await server.start()
        self._server = server
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=1.0)
            self._server = None
