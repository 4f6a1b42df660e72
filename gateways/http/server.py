"""The HTTP gateway as a component: its mesh runtime plus a uvicorn server in the same loop."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn

from gateways.chat.scheduled import ScheduledConversations
from gateways.chat.store import ChatStore, Conversations, default_chat_path
from gateways.dashboard import Dashboard
from gateways.http.app import build_app
from gateways.http.artifacts import ArtifactEdge
from gateways.http.cards import gateway_card
from gateways.http.connections import protocol_with_head_deadline
from gateways.http.settings import HttpGatewaySettings
from gateways.runtime import GatewayRuntime
from mesh.artifacts import ArtifactSettings, ArtifactStore
from mesh.broker import BrokerSettings
from mesh.e2a import ResponseLog
from mesh.errors import PortUnavailableError
from mesh.schedules.store import open_schedule_store
from mesh.trust import Trust

if TYPE_CHECKING:
    from gateways.http.grpc_binding import GrpcServer

log = logging.getLogger(__name__)


class HttpGateway:
    """A2A over HTTP for every agent of a namespace (a :class:`mesh.component.Component`)."""

    kind = "gateway"

    def __init__(
        self,
        settings: HttpGatewaySettings,
        *,
        broker: BrokerSettings,
        namespace: str,
        trust: Trust | None = None,
        artifacts: ArtifactSettings | ArtifactStore | None = None,
        schedules_store: str = "",
    ) -> None:
        self.settings = settings
        self.name = settings.id
        self._socket: socket.socket | None = None
        self.port = settings.port  # the real one once started (port 0 picks a free one)
        response_log = ResponseLog(Path(settings.response_log)) if settings.response_log else None
        self.runtime = GatewayRuntime(
            settings.id,
            broker=broker,
            namespace=namespace,
            card=lambda: gateway_card(settings.id, namespace, self.public_url).to_json_bytes(),
            idle_timeout_s=settings.idle_timeout_s,
            discovery_ttl_s=settings.discovery_ttl_s,
            response_log=response_log,
            trust=trust,
        )
        #: The schedules' record (``schedules_store``: as the file's schedules have it, else $MESH_STORE's,
        #: else the machine's): the chat's scheduled runs, the dashboard's next runs.
        schedules = open_schedule_store(namespace, schedules_store)
        #: The live dashboard at /ui; it watches the mesh only while a page follows it.
        self.dashboard = Dashboard(
            broker,
            namespace,
            owner=settings.id,
            verifier=trust.card_verifier() if trust is not None else None,
            schedules=schedules,
        )
        #: Uploads stored, downloads served (/a2a/artifacts); the store opens on first use.
        self.artifacts = ArtifactEdge(artifacts, namespace)
        #: The chat's conversations (/chat); the SQLite file opens on first use. Each user's scheduled
        #: runs join them, from the schedules' record (closed with the chat, after the dashboard).
        self.chat: Conversations = ScheduledConversations(
            chat_store(settings.chat_store, namespace, settings.id), schedules
        )
        self.app = build_app(self)
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=protocol_with_head_deadline(settings.read_timeout_s),
            timeout_keep_alive=settings.keep_alive_s,
        )
        self._server = uvicorn.Server(config)
        self._serving: asyncio.Task[None] | None = None
        self._grpc: GrpcServer | None = None
        self.grpc_port: int | None = None  # the real one once started

    @property
    def serves_dashboard(self) -> bool:
        """Whether /ui serves the live dashboard (``dashboard`` setting)."""
        return self.settings.dashboard

    @property
    def serves_chat(self) -> bool:
        """Whether /chat serves the chat for people (``chat`` setting)."""
        return self.settings.chat

    @property
    def public_url(self) -> str:
        """The base URL clients use (``public_url`` setting, else ``http://host:port``)."""
        if self.settings.public_url:
            return self.settings.public_url.rstrip("/")
        return f"http://{_url_host(self.settings.host)}:{self.port}"

    @property
    def grpc_url(self) -> str | None:
        """Where the gRPC binding listens (``host:port``), if it is served."""
        if self.grpc_port is None:
            return None
        return f"{_url_host(self.settings.host)}:{self.grpc_port}"

    async def start(self) -> None:
        """Listen, connect to the mesh, then take HTTP (and gRPC) requests."""
        self._socket = _bind(self.settings.host, self.settings.port)
        self.port = int(self._socket.getsockname()[1])
        try:
            await self.runtime.start()
            if self.settings.grpc_port is not None and "1.0" in self.settings.a2a_versions:
                from gateways.http.grpc_binding import GrpcServer  # the grpc extra, only when asked for

                self._grpc = GrpcServer(self)
                self.grpc_port = await self._grpc.start(self.settings.host, self.settings.grpc_port)
        except BaseException:
            self._socket.close()
            raise
        self._serving = asyncio.get_running_loop().create_task(self._server.serve(sockets=[self._socket]))
        while not self._server.started:
            if self._serving.done():
                self._serving.result()  # raises why it could not serve
            await asyncio.sleep(0.01)
        log.info("gateway %s serving A2A on %s (namespace %s)", self.name, self.public_url, self.runtime.namespace)

    async def stop(self) -> None:
        """Stop taking HTTP requests (open streams end), then leave the mesh."""
        self._server.should_exit = True
        self.app.state.streams.close()  # uvicorn would wait for them; their tasks go on on the mesh
        await self.dashboard.close()  # its event streams too
        if self._grpc is not None:
            await self._grpc.stop()
        if self._serving is not None:
            await self._serving
        if self._socket is not None:
            self._socket.close()
        await self.runtime.stop()
        await self.artifacts.store.close()
        await self.chat.aclose()


def chat_store(setting: str | None, namespace: str, gateway_id: str) -> Conversations:
    """The chat's store: a postgresql:// URL (shared by the gateways of several hosts), else a
    SQLite file (default: in the state directory)."""
    from mesh.store import is_postgres_url, parse_store_url

    if setting and is_postgres_url(setting):
        from gateways.chat.pgstore import PostgresChatStore

        return PostgresChatStore(parse_store_url(setting), namespace)
    return ChatStore(Path(setting) if setting else default_chat_path(namespace, gateway_id))


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says it is TCP; without it uvicorn's head-then-body writes stall ~40 ms
    # on every reused connection (Nagle + delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise PortUnavailableError(
            f"the HTTP gateway cannot listen on {host}:{port}: {exc}; choose another port"
        ) from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 - a URL for the wildcard, binds nothing
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
