"""The proxy's gRPC side (the grpc extra): the channel the a2a-sdk's gRPC transport opens.

What :mod:`agents.remote.http` puts on every HTTP request goes on every gRPC call as metadata,
by an interceptor of the channel: the entry's ``headers:``, the API key or bearer token, or the
OAuth 2 token, fetched and refreshed as over HTTP (before it expires, and once when the remote
answers ``UNAUTHENTICATED``, gRPC's 401). The channel is TLS (with ``tls.ca_file``) unless the
remote's own URL is plain ``http://``, where credentials travel as clear as over HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import httpx

from agents.remote.config import RemoteConfig
from agents.remote.http import ApiKey, OAuth2ClientCredentials

__all__ = ["grpc_channels"]


def grpc_channels(remote: RemoteConfig, http: httpx.AsyncClient, auth: httpx.Auth | None) -> Callable[[str], Any]:
    """How the transport opens its channel to a target, with ``auth`` and the entry's headers."""
    plain = remote.where.startswith("http://")
    ca = remote.tls.ca_file.read_bytes() if remote.tls.ca_file is not None else None
    fixed = [(key.lower(), value) for key, value in remote.headers.items()]  # gRPC keys are lowercase
    if isinstance(auth, ApiKey):
        fixed.append((auth.header.lower(), auth.value))
    oauth = auth if isinstance(auth, OAuth2ClientCredentials) else None
    interceptors = None
    if fixed or oauth is not None:  # one per kind of call: grpc.aio files each under its first kind only
        interceptors = [UnaryCredentials(fixed, oauth, http), StreamCredentials(fixed, oauth, http)]

    def channel(target: str) -> Any:
        target = target.removeprefix("grpc://").removeprefix("grpcs://")
        if plain:
            return grpc.aio.insecure_channel(target, interceptors=interceptors)
        tls = grpc.ssl_channel_credentials(root_certificates=ca)
        return grpc.aio.secure_channel(target, tls, interceptors=interceptors)

    return channel


class Credentials:
    """The remote's credentials on each call; an OAuth 2 token the remote refuses is replaced once
    (a unary call is made again; a stream too, when refused before its first event)."""

    def __init__(self, fixed: list[tuple[str, str]], oauth: OAuth2ClientCredentials | None, http: httpx.AsyncClient):
        self._fixed, self._oauth, self._http = fixed, oauth, http

    async def _details(self, details: Any, refused: str | None = None) -> tuple[Any, str | None]:
        metadata = [*(details.metadata or ()), *self._fixed]
        token = None
        if self._oauth is not None:
            token = await self._oauth.bearer(self._http, refused=refused)
            metadata.append(("authorization", f"Bearer {token}"))
        return details._replace(metadata=grpc.aio.Metadata(*metadata)), token


class UnaryCredentials(Credentials, grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        sent, token = await self._details(details)
        call = await continuation(sent, request)
        if token is not None and await call.code() == grpc.StatusCode.UNAUTHENTICATED:
            sent, _ = await self._details(details, refused=token)
            call = await continuation(sent, request)
        return call


class StreamCredentials(Credentials, grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        sent, token = await self._details(details)
        call = await continuation(sent, request)
        if token is None:
            return call
        return self._once_more(call, continuation, details, request, token)

    async def _once_more(
        self, call: Any, continuation: Any, details: Any, request: Any, token: str
    ) -> AsyncIterator[Any]:
        try:
            event = await call.read()
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNAUTHENTICATED:
                raise
            sent, _ = await self._details(details, refused=token)
            call = await continuation(sent, request)
            event = await call.read()
        while event is not grpc.aio.EOF:
            yield event
            event = await call.read()
