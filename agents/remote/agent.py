"""An agent whose work is done by a remote HTTP A2A agent, reached with the official a2a-sdk client.

The proxy is a mesh agent like any other: the task runtime keeps the mesh task (its journal,
``tasks/get``, ``tasks/resubscribe``, push configs, owners), and each segment of it is one
``SendMessage`` (streamed when the remote streams) to the remote. The remote's events become the
task's status and artifact updates in order; ``input-required`` waits for the mesh client's
answer, which continues the remote task; ``tasks/cancel`` cancels the remote task; inline files
above the artifact threshold become ``artifact://`` parts. The remote task and context ids ride on
the task's messages (``metadata.remote``), so an answer after a restart, or the next message of
the same context, continues the same remote task or context.

The remote's card, fetched at start and by the health loop (:mod:`agents.remote.health`), is
the mesh card (translated, signed by the proxy like any card); a remote that stops answering
takes it off the mesh, and it comes back when the remote does.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb

from agents.agent import Agent
from agents.context import TaskContext
from agents.remote.config import RemoteConfig
from agents.remote.health import CardWatch
from agents.remote.http import RateLimit, RemoteError, describe, http_client
from agents.remote.translate import REMOTE_EXTENSION, RemoteIds, mesh_card, outgoing, updates_of
from agents.updates import AuthRequired, Ending, InputRequired, Rejected, Reply, TaskFailed, Update
from mesh.a2a import AgentCard, AgentExtension, Message
from mesh.discovery.remote_cards import fetch_remote_card
from mesh.limits import MessageLimits

__all__ = ["RemoteAgent"]

log = logging.getLogger(__name__)

#: How long ``tasks/cancel`` waits for the remote to confirm before the mesh task ends anyway.
CANCEL_TIMEOUT_S = 5.0
#: After a cancel or an answer, how long the remote's stream may take to end before it is cut.
DRAIN_S = 2.0
#: The terminal answers relayed as they arrive (the rest of the stream is read in the background).
Answer = Reply | Rejected


def _bindings(preferred: str | None) -> list[str]:
    bindings = ["JSONRPC", "HTTP+JSON"]
    if importlib.util.find_spec("grpc") is not None:  # the grpc extra
        bindings.append("GRPC")
    if preferred is not None:
        bindings = [preferred, *(b for b in bindings if b != preferred)]
    return bindings


def _grpc_channels(
    remote: RemoteConfig, http: httpx.AsyncClient, auth: httpx.Auth | None
) -> Callable[[str], Any] | None:
    """How the a2a-sdk's gRPC transport opens its channel (:mod:`agents.remote.grpc_channel`),
    or None without the grpc extra."""
    try:
        from agents.remote.grpc_channel import grpc_channels
    except ImportError:
        return None
    return grpc_channels(remote, http, auth)


def _shown(url: str) -> str:
    """``url`` as a card may show it: no user info, no query (either may hold a secret)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


class RemoteAgent(Agent):
    """Serves the remote A2A agent of ``remote`` (a :class:`RemoteConfig`) on the mesh."""

    description = "A remote A2A agent"
    input_modes = ("text/plain", "application/json", "*/*")
    output_modes = ("text/plain", "application/json", "*/*")

    def __init__(self, *, remote: RemoteConfig, name: str | None = None, **card: Any) -> None:
        super().__init__(name=name, **card)
        self.remote = remote
        self._overrides = {key for key in ("description", "version") if card.get(key) is not None}
        self._slots = asyncio.Semaphore(remote.max_concurrent)
        self.limits = MessageLimits()  # what a remote's answers are held to, as requests to agents are
        self._rate = RateLimit(remote.rate_per_s)
        self._client: Client | None = None
        self._http, self.auth = http_client(remote)
        self.remote_card: pb.AgentCard | None = None
        self.watch = CardWatch(self)
        self.draining: set[asyncio.Task[None]] = set()  # streams read to their end after the answer
        #: Set by the runtime (AgentService.start): publish (True) or withdraw (False) the card.
        self.announce: Callable[[bool], Awaitable[None]] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def setup(self) -> None:
        try:
            await self.refresh_card()
        except RemoteError as exc:
            log.warning("%s: %s; the agent joins the mesh when the remote answers", self.name, exc)
            if self.announce is not None:  # no card until the remote answers
                await self.announce(False)
                self.watch.present = False
        self.watch.start()

    async def teardown(self) -> None:
        await self.watch.stop()
        for task in list(self.draining):
            task.cancel()
        await asyncio.gather(*self.draining, return_exceptions=True)
        await self._http.aclose()

    async def fetch_card(self) -> pb.AgentCard:
        """The remote's card, fetched now (:class:`RemoteError` naming the URL, status and fix)."""
        return await fetch_remote_card(self._http, self.remote.card_address())

    async def refresh_card(self) -> bool:
        """Fetch the card again; a new one makes a new client. Whether the card changed."""
        card = await self.fetch_card()
        if self.remote.url is not None:  # the endpoint the file names, in the version the card says
            binding = self.remote.binding or "JSONRPC"
            offered = [i for i in card.supported_interfaces if i.protocol_binding == binding]
            version = next((i.protocol_version for i in offered if i.url == self.remote.url), None)
            version = version or (offered[0].protocol_version if offered else "1.0")
            del card.supported_interfaces[:]
            card.supported_interfaces.add(url=self.remote.url, protocol_binding=binding, protocol_version=version)
        if card == self.remote_card and self._client is not None:
            return False
        config = ClientConfig(
            streaming=True,
            httpx_client=self._http,
            supported_protocol_bindings=_bindings(self.remote.binding),
            use_client_preference=self.remote.binding is not None,  # binding: is a preference; else the card's
            grpc_channel_factory=_grpc_channels(self.remote, self._http, self.auth),
        )
        try:
            client = ClientFactory(config).create(card)
        except ValueError as exc:
            raise RemoteError(
                f"remote {self.remote.where}: {exc} (its card offers "
                f"{[i.protocol_binding for i in card.supported_interfaces]}); set binding: to one it serves"
            ) from None
        self._client, self.remote_card = client, card
        return True

    @property
    def client_transport(self) -> object:
        """The a2a-sdk transport the card chose (which binding and version the proxy speaks)."""
        return getattr(self._client, "_transport", None)

    def card(self, *, url: str, push_notifications: bool) -> AgentCard:
        base = super().card(url=url, push_notifications=push_notifications)
        if self.remote_card is None:
            return base
        remote = mesh_card(self.remote_card, url=url)
        skills = self.remote.skills if self.remote.skills is not None else remote.skills
        extension = AgentExtension(
            uri=REMOTE_EXTENSION,
            description="served by a mesh proxy for a remote A2A agent",
            params={"url": _shown(self.remote.where), "version": remote.version},
        )
        capabilities = base.capabilities.model_copy(
            update={"streaming": bool(remote.capabilities.streaming), "extensions": [extension]}
        )
        return base.model_copy(
            update={
                "description": base.description if "description" in self._overrides else remote.description,
                "version": base.version if "version" in self._overrides else remote.version,
                "skills": skills,
                "capabilities": capabilities,
                "default_input_modes": remote.default_input_modes,
                "default_output_modes": remote.default_output_modes,
            }
        )

    # ------------------------------------------------------------------ tasks

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncGenerator[Update, Message | None]:
        ids = self._known_ids(ctx)
        while True:
            ending: Update | None = None
            # A terminal answer goes to the caller as it arrives (the rest of the remote's stream
            # is read in the background: see _segment). An interrupted state is held back until the
            # stream ends, as a later event may supersede it: a continued task is first announced
            # as it was (input-required), then goes on.
            async with contextlib.aclosing(self._segment(message, ids, ctx)) as updates:
                async for update in updates:
                    if isinstance(update, Answer):
                        yield update
                        return
                    if isinstance(update, Ending):
                        ending = update
                    else:
                        ending = None
                        yield update
            if not isinstance(ending, InputRequired | AuthRequired):
                if ending is not None:
                    yield ending
                return
            reply = yield ending  # the mesh client's answer continues the remote task
            if not isinstance(reply, Message):
                return
            message = reply

    def _known_ids(self, ctx: TaskContext) -> RemoteIds:
        """The remote task this mesh task waits on, or the remote context of this mesh context."""
        for earlier in reversed(ctx.history):
            ids = RemoteIds.of(earlier)
            if ids is None:
                continue
            if earlier.task_id == ctx.task_id:  # an answer after a restart: the same remote task
                return ids
            return RemoteIds(context_id=ids.context_id)
        return RemoteIds()

    async def _segment(self, message: Message, ids: RemoteIds, ctx: TaskContext) -> AsyncGenerator[Update, None]:
        client = self._client
        if client is None or not self.watch.alive:
            raise TaskFailed(self.watch.reason or f"remote {self.remote.where} is not reachable now; try again later")
        async with self._slots:
            await self._rate.take()
            # The remote stream is read by a task of its own, so a tasks/cancel arriving before the
            # remote named its task can still wait for the name and cancel it there.
            events: asyncio.Queue[Any] = asyncio.Queue()
            named = asyncio.Event()
            pump = asyncio.get_running_loop().create_task(self._pump(client, message, ids, events, named))
            answered = False
            try:
                while (item := await events.get()) is not None:
                    if isinstance(item, BaseException):
                        raise item
                    answered = isinstance(item, Answer)
                    yield item
            except asyncio.CancelledError:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(CANCEL_TIMEOUT_S):
                        await named.wait()
                await self._cancel_remote(client, ids)
                # The remote ends its stream with the task: read to there (its connection is reused).
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(pump), DRAIN_S)
                raise
            finally:
                if answered and not pump.done():
                    self._drain(pump)
                else:
                    pump.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pump

    def _drain(self, pump: asyncio.Task[None]) -> None:
        """Let ``pump`` read the remote's stream to its end (its connection goes back to the pool),
        within ``DRAIN_S``, after the task was answered: the remote ends its stream with the task."""

        async def drain() -> None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(pump, DRAIN_S)

        task = asyncio.get_running_loop().create_task(drain(), name=f"{self.name}: end of a remote stream")
        self.draining.add(task)
        task.add_done_callback(self.draining.discard)

    async def _pump(
        self, client: Client, message: Message, ids: RemoteIds, events: asyncio.Queue[Any], named: asyncio.Event
    ) -> None:
        """The remote's events as updates into ``events``, then ``None`` (or the error that ended them)."""
        try:
            async for event in client.send_message(outgoing(message, ids)):
                for update in updates_of(event, ids, self.limits):
                    events.put_nowait(update)
                if ids.task_id is not None:
                    named.set()
            events.put_nowait(None)
        except TaskFailed as failure:
            events.put_nowait(failure)
        except Exception as exc:
            error = describe(self.remote.where, exc)
            self.watch.failed(error)
            events.put_nowait(TaskFailed(str(error)))
        finally:
            named.set()

    async def _cancel_remote(self, client: Client, ids: RemoteIds) -> None:
        if ids.task_id is None:
            return
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT_S):
                await client.cancel_task(pb.CancelTaskRequest(id=ids.task_id))
        except Exception as exc:  # the mesh task ends canceled either way; the reason is logged
            log.warning("%s: canceling remote task %s: %s", self.name, ids.task_id, describe(self.remote.where, exc))
