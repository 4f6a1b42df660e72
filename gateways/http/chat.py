"""The chat for people (Starlette routes): conversations with any agent, as the signed-in user.

==================================================  ==============================================
``GET /chat``                                       the page (``gateways/chat/static``); a browser
                                                    not signed in is sent to ``/signin``
``GET /chat/static/{file}``                         its assets, from the package (no CDN)
``GET /chat/api/conversations``                     the user's conversations, the latest first
``POST /chat/api/conversations``                    ``{"agent"}``: a new one, on a new contextId
``GET /chat/api/conversations/{id}``                one, with its turns
``DELETE /chat/api/conversations/{id}``             forget one
``POST /chat/api/conversations/{id}/messages``      ``{"text", "taskId"?, "files"?, "approvals"?}``:
                                                    the message to the agent (``message/stream``);
                                                    SSE of the answer's A2A items (``item``),
                                                    ``end``/``error``; ``approvals`` answers an LLM
                                                    agent's tool approvals (``tool_approval_result``
                                                    parts: ``{"tool_call_id", "approved", ...}``)
``POST /chat/api/conversations/{id}/resume``        ``{"seq"}``: follow an answer still running
                                                    (``tasks/resubscribe``), after a reload
``POST /chat/api/conversations/{id}/cancel``        ``{"taskId"}``: ``tasks/cancel``
==================================================  ==============================================

Every call goes through the gateway's own A2A path (:func:`~gateways.http.serving.serve_call`)
as the caller: the agent sees the real user (``userId`` and the user token the gateway mints),
tasks and artifacts are owned by them. The gateway records each turn as it streams (the
agent's stream items, text chunks merged, and each artifact once: its streamed chunks merged
into one ``artifact-update`` as A2A's ``append`` says, and the final Task's whole artifact in
its place rather than beside it) in :class:`~gateways.chat.store.ChatStore`. Download
links are kept unsigned (plain ``/a2a/artifacts/...`` paths): they work for their owner's
session only. Files dropped on the page are stored as artifacts of the conversation's context,
owned by the user, and sent as file parts by URI.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import anyio
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateways.chat.store import ChatLimitReached, Conversations
from gateways.http.assets import StaticAssets
from gateways.http.edge import RefusedCaller, caller_of
from gateways.http.rpc import RpcCall, error_of, parse_call, result_of
from gateways.http.serving import read_body, serve_call
from gateways.http.sessions import CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE, csrf_refused, same_token
from gateways.http.signin import html_escape, page_session, set_session_cookie, signin_url
from mesh.a2a import RpcError
from mesh.artifacts import ArtifactError, ArtifactRef
from mesh.artifacts.parts import safe_file_name
from mesh.e2a import E2AResponse
from topics import validate_identifier

if TYPE_CHECKING:
    from gateways.http.server import HttpGateway

__all__ = ["PREFIX", "RequirePageCaller", "chat_routes"]

PREFIX = "/chat"
MAX_TEXT = 20_000  # characters of one message
MAX_FILES = 5  # per message
SAVE_EVERY_S = 1.0  # a running answer is written down at least this often
_ASSETS = resources.files("gateways.chat") / "static"
#: The page runs only its own scripts and styles, talks only to this gateway, is framed by nobody.
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
_TERMINAL = frozenset({"completed", "failed", "canceled", "rejected", "input-required", "auth-required"})


# ---------------------------------------------------------------- middleware


class RequirePageCaller:
    """Route middleware of a page: a browser that is not signed in is sent to the sign-in page
    (303); other clients get the 401 as on every private route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if isinstance(user, RefusedCaller):
            request = Request(scope, receive)
            if scope.get("method") == "GET" and "text/html" in request.headers.get("accept", ""):
                await RedirectResponse(signin_url(request), status_code=303)(scope, receive, send)
                return
            raise user.refusal
        await self.app(scope, receive, send)


class RequireCsrfWhenOpen:
    """Route middleware: with authentication off, a state-changing request still needs a session
    and its CSRF token (with it on, :class:`~gateways.http.edge.CallerBackend` checks them)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") not in SAFE_METHODS and scope["app"].state.authenticator.config.mode == "none":
            request = Request(scope, receive)
            session = request.app.state.sessions.get(request.cookies.get(SESSION_COOKIE))
            if session is None or not same_token(request.headers.get(CSRF_HEADER), session.csrf):
                raise csrf_refused()
        await self.app(scope, receive, send)


# ---------------------------------------------------------------- routes


def chat_routes(api_middleware: Sequence[Middleware]) -> list[Route]:
    """The chat's routes; ``api_middleware``: the gateway's private-route checks."""
    # Read once, here; the pages (HTML) are served by their own routes, not as assets.
    assets = StaticAssets(_ASSETS, what="chat", suffixes=(".html", ".css", ".js"), pages=(".html",))
    page = assets.text("chat.html")
    api = [*api_middleware, Middleware(RequireCsrfWhenOpen)]
    page_middleware = [Middleware(RequirePageCaller)]

    async def page_route(request: Request) -> Response:
        return _page(request, page)

    async def asset_route(request: Request) -> Response:
        return assets.response(request.path_params["name"])

    base = PREFIX + "/api/conversations"
    return [
        Route(PREFIX, page_route, methods=["GET"], middleware=page_middleware),
        Route(PREFIX + "/static/{name}", asset_route, methods=["GET"]),  # public: no data in them
        Route(base, _list, methods=["GET"], middleware=api),
        Route(base, _create, methods=["POST"], middleware=api),
        Route(base + "/{id}", _get, methods=["GET"], middleware=api),
        Route(base + "/{id}", _delete, methods=["DELETE"], middleware=api),
        Route(base + "/{id}/messages", _message, methods=["POST"], middleware=api),
        Route(base + "/{id}/resume", _resume, methods=["POST"], middleware=api),
        Route(base + "/{id}/cancel", _cancel, methods=["POST"], middleware=api),
    ]


def _gateway(request: Request) -> HttpGateway:
    gateway: HttpGateway = request.app.state.gateway
    return gateway


def _store(request: Request) -> Conversations:
    return _gateway(request).chat


def _page(request: Request, html: str) -> Response:
    session, new_session_id = page_session(request)
    principal = caller_of(request)
    gateway = _gateway(request)
    root = request.scope.get("root_path", "")
    values = {
        "{{BASE}}": root + PREFIX + "/",
        "{{ROOT}}": root,
        "{{CSRF}}": session.csrf if session is not None else "",
        "{{USER}}": principal.name,
        "{{MODE}}": gateway.settings.auth.mode,
        "{{DEFAULT_AGENT}}": gateway.settings.default_agent or "",
        "{{NAMESPACE}}": gateway.runtime.namespace,
    }
    for key, value in values.items():
        html = html.replace(key, html_escape(value))
    response = Response(html, media_type="text/html", headers=PAGE_HEADERS)
    if new_session_id is not None:
        set_session_cookie(response.headers, request, new_session_id, request.app.state.sessions.ttl_s)
    return response


def _problem(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json_body(request: Request) -> dict[str, Any] | None:
    try:
        body = json.loads(await read_body(request, _gateway(request).settings.read_timeout_s))
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def _list(request: Request) -> Response:
    owner = caller_of(request).name
    return JSONResponse({"user": owner, "conversations": await _store(request).conversations(owner)})


async def _create(request: Request) -> Response:
    body = await _json_body(request)
    gateway = _gateway(request)
    agent = (body or {}).get("agent") or gateway.settings.default_agent
    if not isinstance(agent, str):
        return _problem('send {"agent": "<name>"}: this gateway has no default agent')
    try:
        validate_identifier(agent, "agent name")
    except ValueError as exc:
        return _problem(str(exc))
    if gateway.runtime.agent(agent) is None:
        names = ", ".join(gateway.runtime.agent_names()) or "none"
        return _problem(f"no agent {agent!r} on the mesh (agents: {names})", 404)
    conversation = await _store(request).create(caller_of(request).name, agent)
    return JSONResponse(conversation, status_code=201)


async def _owned(request: Request, *, turns: bool = False) -> dict[str, Any] | None:
    return await _store(request).get(caller_of(request).name, request.path_params["id"], turns=turns)


def _not_found() -> JSONResponse:
    return _problem("no such conversation", 404)  # another user's is indistinguishable


async def _get(request: Request) -> Response:
    conversation = await _owned(request, turns=True)
    return _not_found() if conversation is None else JSONResponse(conversation)


async def _delete(request: Request) -> Response:
    deleted = await _store(request).delete(caller_of(request).name, request.path_params["id"])
    return Response(status_code=204) if deleted else _not_found()


# ---------------------------------------------------------------- talking to the agent


def _message_problem(body: dict[str, Any] | None) -> str | None:
    if body is None:
        return 'send a JSON object {"text": "<message>", "taskId"?: "<task answering>", "files"?: [...]}'
    text, task_id, files = body.get("text"), body.get("taskId"), body.get("files", [])
    if not isinstance(text, str) or (not text.strip() and not files):
        return '"text" must be a non-empty string (or send a file)'
    if len(text) > MAX_TEXT:
        return f'"text" has {len(text)} characters; a chat message has at most {MAX_TEXT}'
    if task_id is not None and (not isinstance(task_id, str) or not task_id):
        return '"taskId" must be the id of the task whose question this answers'
    approvals = body.get("approvals")
    if approvals is not None and (
        not task_id
        or not isinstance(approvals, list)
        or not all(isinstance(a, dict) and isinstance(a.get("tool_call_id"), str) for a in approvals)
    ):
        return '"approvals" must go with "taskId": a list of {"tool_call_id": ..., "approved": true|false}'
    if not isinstance(files, list) or len(files) > MAX_FILES:
        return f'"files" must be a list of at most {MAX_FILES} {{"name", "mimeType", "bytes" (base64)}}'
    for file in files:
        if not isinstance(file, dict) or not isinstance(file.get("bytes"), str):
            return 'each file is {"name": ..., "mimeType": ..., "bytes": "<base64>"}'
    return None


async def _message(request: Request) -> Response:
    conversation = await _owned(request)
    if conversation is None:
        return _not_found()
    body = await _json_body(request)
    problem = _message_problem(body)
    if problem is not None or body is None:
        return _problem(problem or "")
    principal = caller_of(request)
    gateway = _gateway(request)
    context_id = conversation["contextId"]
    parts: list[dict[str, Any]] = []
    shown_files: list[dict[str, Any]] = []
    for index, file in enumerate(body.get("files", [])):
        try:
            content = base64.b64decode(file["bytes"], validate=True)
        except (binascii.Error, ValueError):
            return _problem(f"files[{index}].bytes is not base64")
        name = safe_file_name(file.get("name"), f"upload-{index + 1}")
        mime = file.get("mimeType") if isinstance(file.get("mimeType"), str) and file.get("mimeType") else None
        try:
            info = await gateway.artifacts.store.save(
                context_id, name, content, mime_type=mime, owner_user=principal.name
            )
        except ArtifactError as exc:
            return _problem(f"files[{index}] could not be stored: {exc}")
        parts.append({"kind": "file", "file": {"uri": info.uri, "name": info.name, "mimeType": info.mime_type}})
        shown_files.append(
            {"name": info.name, "mimeType": info.mime_type, "size": info.size, "url": _download(info.uri)}
        )
    text: str = body["text"]
    if body.get("approvals"):  # the text only says it in the conversation; the parts answer
        parts = [{"kind": "data", "data": _approval(a)} for a in body["approvals"]]
    elif text.strip():
        parts.insert(0, {"kind": "text", "text": text})
    message: dict[str, Any] = {"kind": "message", "role": "user", "messageId": uuid.uuid4().hex, "parts": parts}
    message["contextId"] = context_id
    if body.get("taskId"):
        message["taskId"] = body["taskId"]
    store = _store(request)
    title = text.strip().splitlines()[0] if text.strip() else (shown_files[0]["name"] if shown_files else "")
    try:
        await store.add_turn(
            principal.name, conversation["id"], "user", {"text": text, "files": shown_files}, title=title
        )
        seq = await store.add_turn(principal.name, conversation["id"], "agent", {"events": []})
    except ChatLimitReached as exc:
        return _problem(str(exc), 409)
    request_body = {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}
    binding = _ChatBinding(store, conversation["id"], seq, [])
    return await _serve(request, binding, request_body, conversation["agent"])


def _approval(answer: dict[str, Any]) -> dict[str, Any]:
    """One ``tool_approval_result`` part's data, from the page's answer (only the keys it may set)."""
    data: dict[str, Any] = {
        "type": "tool_approval_result",
        "tool_call_id": answer["tool_call_id"],
        "approved": answer.get("approved") is True,
    }
    if isinstance(answer.get("arguments"), dict):
        data["arguments"] = answer["arguments"]
    if isinstance(answer.get("reason"), str):
        data["reason"] = answer["reason"][:MAX_TEXT]
    return data


async def _resume(request: Request) -> Response:
    conversation = await _owned(request, turns=True)
    body = await _json_body(request)
    if conversation is None:
        return _not_found()
    seq = (body or {}).get("seq")
    turns = conversation["turns"]
    if not isinstance(seq, int) or not 0 <= seq < len(turns) or turns[seq]["role"] != "agent":
        return _problem('send {"seq": <the number of an answer of this conversation>}')
    turn = turns[seq]
    if not turn.get("taskId") or turn.get("state") in _TERMINAL:
        return _problem("that answer is not running", 409)
    request_body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {"id": turn["taskId"]}}
    binding = _ChatBinding(_store(request), conversation["id"], seq, list(turn.get("events", [])))
    binding.task_id, binding.state = turn["taskId"], turn.get("state")
    return await _serve(request, binding, request_body, conversation["agent"])


async def _cancel(request: Request) -> Response:
    conversation = await _owned(request)
    body = await _json_body(request)
    if conversation is None:
        return _not_found()
    task_id = (body or {}).get("taskId")
    if not isinstance(task_id, str) or not task_id:
        return _problem('send {"taskId": "<the running task>"}')
    request_body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": task_id}}
    return await serve_call(
        request, lambda: parse_call(json.dumps(request_body).encode(), None), _CANCEL, agent_name=conversation["agent"]
    )


async def _serve(request: Request, binding: _ChatBinding, body: dict[str, Any], agent: str) -> Response:
    response = await serve_call(request, lambda: parse_call(json.dumps(body).encode(), None), binding, agent_name=agent)
    if binding.failure is not None:  # refused before the mesh: the turn says so
        await binding.save("failed")
    return response


def _download(uri: str) -> str:
    """The gateway's download path of an ``artifact://`` URI (relative: the page's own origin)."""
    ref = ArtifactRef.parse(uri)
    query = f"?version={ref.version}" if ref.version is not None else ""
    return f"/a2a/artifacts/{quote(ref.context_id)}/{quote(ref.name)}{query}"


def _unsigned(value: Any) -> Any:
    """Wire JSON with every gateway download link as a bare path (no signature: the owner's
    session opens it, nobody else's), in place of the signed absolute link."""
    if isinstance(value, dict):
        file = value.get("file")
        if isinstance(file, dict) and isinstance(file.get("uri"), str) and "/a2a/artifacts/" in file["uri"]:
            url = urlsplit(file["uri"])
            kept = [(k, v) for k, v in parse_qsl(url.query) if k == "version"]
            value = {**value, "file": {**file, "uri": url.path + (f"?{urlencode(kept)}" if kept else "")}}
        return {k: _unsigned(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [_unsigned(v) for v in value]
    return value


def _is_text_chunk(item: Any) -> bool:
    if not isinstance(item, dict) or item.get("kind") != "status-update":
        return False
    message = (item.get("status") or {}).get("message") or {}
    return (message.get("metadata") or {}).get("llmEvent") == "text"


def _artifact_event_at(events: list[Any], artifact_id: str) -> int | None:
    for index, event in enumerate(events):
        artifact = event.get("artifact") if isinstance(event, dict) and event.get("kind") == "artifact-update" else None
        if isinstance(artifact, dict) and artifact.get("artifactId") == artifact_id:
            return index
    return None


def _record_artifact(events: list[Any], item: Any) -> bool:
    """Keep each artifact once in a turn: a streamed chunk goes into the artifact's one
    ``artifact-update`` (A2A's ``append`` adds its parts, else it replaces them, ``lastChunk``
    is the latest); a Task's whole artifact replaces that event's and leaves the stored Task
    (those it streamed). True when ``item`` was merged in (nothing to append)."""
    if not isinstance(item, dict):
        return False
    kind = item.get("kind")
    if kind == "artifact-update":
        artifact = item.get("artifact")
        artifact_id = artifact.get("artifactId") if isinstance(artifact, dict) else None
        at = _artifact_event_at(events, artifact_id) if isinstance(artifact_id, str) else None
        if at is None or not isinstance(artifact, dict):
            return False
        stored = events[at]
        if item.get("append") is True:  # new dicts and lists: what was sent stays as it was
            parts = [*stored["artifact"].get("parts", []), *artifact.get("parts", [])]
            artifact = {**stored["artifact"], "parts": parts}
        events[at] = {**stored, "artifact": artifact, "lastChunk": item.get("lastChunk")}
        return True
    if kind == "task" and isinstance(item.get("artifacts"), list):
        kept = []
        for artifact in item["artifacts"]:
            artifact_id = artifact.get("artifactId") if isinstance(artifact, dict) else None
            at = _artifact_event_at(events, artifact_id) if isinstance(artifact_id, str) else None
            if at is None:
                kept.append(artifact)
            else:
                events[at] = {**events[at], "artifact": artifact, "lastChunk": True}
        if len(kept) < len(item["artifacts"]):
            events.append({**item, "artifacts": kept})
            return True
    return False


def _sse(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


class _ChatBinding:
    """Serves the chat's SSE and writes the answer down as it comes (a :class:`Binding`)."""

    errors_in_stream = False

    def __init__(self, store: Conversations, conversation: str, seq: int, events: list[Any]) -> None:
        self.store = store
        self.conversation = conversation
        self.seq = seq
        self.events = events
        self.task_id: str | None = None
        self.state: str | None = None
        self.failure: str | None = None
        self._dirty = asyncio.Event()
        self._done = False
        self._writer: asyncio.Task[None] | None = None

    def _changed(self) -> None:
        """Write the turn down soon, off the stream's path: the next event goes out meanwhile."""
        self._dirty.set()
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        while not self._done:
            await self._dirty.wait()
            self._dirty.clear()
            await self.save()

    async def _finish(self) -> None:
        """The last write, after any the writer has under way (so the last state wins)."""
        if self._done:
            return
        self._done = True
        if self._writer is not None:
            self._dirty.set()
            await self._writer
        await self.save()

    async def save(self, state: str | None = None) -> None:
        if state is not None:
            self.state = state
        body: dict[str, Any] = {"events": self.events}
        if self.failure is not None:
            body["error"] = self.failure
        await self.store.update_turn(self.conversation, self.seq, body, task_id=self.task_id, state=self.state)

    def _record(self, item: Any) -> None:
        if isinstance(item, dict):
            self.task_id = (
                item.get("taskId") or (item.get("id") if item.get("kind") == "task" else None) or self.task_id
            )
            status = item.get("status")
            if isinstance(status, dict) and isinstance(status.get("state"), str):
                self.state = status["state"]
            elif item.get("kind") == "message":
                self.state = "completed"
        if _record_artifact(self.events, item):
            return
        if _is_text_chunk(item) and self.events and _is_text_chunk(self.events[-1]):
            last = self.events[-1]
            merged = json.loads(json.dumps(last))  # a copy: the stored one changes, not the sent one
            parts = merged["status"]["message"]["parts"]
            new_text = "".join(p.get("text", "") for p in item["status"]["message"].get("parts", []))
            parts[:] = [{"kind": "text", "text": "".join(p.get("text", "") for p in parts) + new_text}]
            self.events[-1] = merged
        else:
            self.events.append(item)

    def result(self, call: RpcCall, result: Any) -> Response:  # pragma: no cover - no local methods here
        return JSONResponse(result)

    def error(self, version: str, call: RpcCall | None, error: RpcError) -> Response:
        self.failure = error.error.message
        status = 404 if error.code in (-32001, -32000) else 409 if error.code == -32002 else 400
        return _problem(error.error.message, status)

    def unary(self, call: RpcCall, frame: E2AResponse) -> Response:  # pragma: no cover - streams only
        return JSONResponse(result_of(frame))

    def stream(self, call: RpcCall, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:
        return self._stream(frames)

    async def _stream(self, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:
        saved_at = time.monotonic()
        try:
            async for frame in frames:
                if frame.response_kind == "e2a.error":
                    error = error_of(frame)
                    self.failure = error.error.message
                    self.state = "failed"
                    await self._finish()
                    yield _sse("error", {"message": error.error.message})
                    return
                item = frame.body["payload"] if frame.response_kind == "a2a.stream_event" else result_of(frame)
                item = _unsigned(item)
                yield _sse("item", item)  # first out, then written down
                self._record(item)
                if not _is_text_chunk(item) or time.monotonic() - saved_at > SAVE_EVERY_S:
                    self._changed()
                    saved_at = time.monotonic()
                if frame.is_final:
                    break
            await self._finish()  # written down before the page hears the end
            yield _sse("end", {"state": self.state})
        finally:
            with anyio.CancelScope(shield=True):  # the page left (its request canceled): keep what came
                await self._finish()
            await frames.aclose()  # type: ignore[attr-defined]


class _CancelBinding:
    """``tasks/cancel``'s answer as plain JSON."""

    errors_in_stream = False

    def result(self, call: RpcCall, result: Any) -> Response:  # pragma: no cover
        return JSONResponse(result)

    def error(self, version: str, call: RpcCall | None, error: RpcError) -> Response:
        return _problem(error.error.message, 409 if error.code == -32002 else 404 if error.code == -32001 else 400)

    def unary(self, call: RpcCall, frame: E2AResponse) -> Response:
        if frame.response_kind == "e2a.error":
            return self.error("0.3", call, error_of(frame))
        return JSONResponse({"task": _unsigned(result_of(frame))})

    def stream(self, call: RpcCall, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:  # pragma: no cover
        raise TypeError("tasks/cancel does not stream")


_CANCEL = _CancelBinding()
