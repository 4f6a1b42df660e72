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
owned by the user, and sent as file parts by URI. Recording an answer as it streams is
:mod:`gateways.http.chatanswers`.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateways.chat.store import ChatLimitReached, Conversations
from gateways.http.assets import StaticAssets
from gateways.http.chatanswers import CANCEL_BINDING, ChatBinding, chat_problem, download_path
from gateways.http.edge import RefusedCaller, caller_of
from gateways.http.rpc import parse_call
from gateways.http.serving import read_body, serve_call
from gateways.http.sessions import CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE, csrf_refused, same_token
from gateways.http.signin import html_escape, page_session, set_session_cookie, signin_url
from mesh.artifacts import ArtifactError
from mesh.artifacts.parts import safe_file_name
from topics import validate_identifier

if TYPE_CHECKING:
    from gateways.http.server import HttpGateway

__all__ = ["PREFIX", "RequirePageCaller", "chat_routes"]

PREFIX = "/chat"
MAX_TEXT = 20_000  # characters of one message
MAX_FILES = 5  # per message
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
        return chat_problem('send {"agent": "<name>"}: this gateway has no default agent')
    try:
        validate_identifier(agent, "agent name")
    except ValueError as exc:
        return chat_problem(str(exc))
    if gateway.runtime.agent(agent) is None:
        names = ", ".join(gateway.runtime.agent_names()) or "none"
        return chat_problem(f"no agent {agent!r} on the mesh (agents: {names})", 404)
    conversation = await _store(request).create(caller_of(request).name, agent)
    return JSONResponse(conversation, status_code=201)


async def _owned(request: Request, *, turns: bool = False) -> dict[str, Any] | None:
    return await _store(request).get(caller_of(request).name, request.path_params["id"], turns=turns)


def _not_found() -> JSONResponse:
    return chat_problem("no such conversation", 404)  # another user's is indistinguishable


async def _get(request: Request) -> Response:
    conversation = await _owned(request, turns=True)
    return _not_found() if conversation is None else JSONResponse(conversation)


async def _delete(request: Request) -> Response:
    deleted = await _store(request).delete(caller_of(request).name, request.path_params["id"])
    return Response(status_code=204) if deleted else _not_found()


# ---------------------------------------------------------------- talking to the agent


def _messageproblem(body: dict[str, Any] | None) -> str | None:
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
    problem = _messageproblem(body)
    if problem is not None or body is None:
        return chat_problem(problem or "")
    principal = caller_of(request)
    gateway = _gateway(request)
    context_id = conversation["contextId"]
    parts: list[dict[str, Any]] = []
    shown_files: list[dict[str, Any]] = []
    for index, file in enumerate(body.get("files", [])):
        try:
            content = base64.b64decode(file["bytes"], validate=True)
        except (binascii.Error, ValueError):
            return chat_problem(f"files[{index}].bytes is not base64")
        name = safe_file_name(file.get("name"), f"upload-{index + 1}")
        mime = file.get("mimeType") if isinstance(file.get("mimeType"), str) and file.get("mimeType") else None
        try:
            info = await gateway.artifacts.store.save(
                context_id, name, content, mime_type=mime, owner_user=principal.name
            )
        except ArtifactError as exc:
            return chat_problem(f"files[{index}] could not be stored: {exc}")
        parts.append({"kind": "file", "file": {"uri": info.uri, "name": info.name, "mimeType": info.mime_type}})
        shown_files.append(
            {"name": info.name, "mimeType": info.mime_type, "size": info.size, "url": download_path(info.uri)}
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
        return chat_problem(str(exc), 409)
    request_body = {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}
    binding = ChatBinding(store, conversation["id"], seq, [])
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
        return chat_problem('send {"seq": <the number of an answer of this conversation>}')
    turn = turns[seq]
    if not turn.get("taskId") or turn.get("state") in _TERMINAL:
        return chat_problem("that answer is not running", 409)
    request_body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {"id": turn["taskId"]}}
    binding = ChatBinding(_store(request), conversation["id"], seq, list(turn.get("events", [])))
    binding.task_id, binding.state = turn["taskId"], turn.get("state")
    return await _serve(request, binding, request_body, conversation["agent"])


async def _cancel(request: Request) -> Response:
    conversation = await _owned(request)
    body = await _json_body(request)
    if conversation is None:
        return _not_found()
    task_id = (body or {}).get("taskId")
    if not isinstance(task_id, str) or not task_id:
        return chat_problem('send {"taskId": "<the running task>"}')
    request_body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": task_id}}
    return await serve_call(
        request,
        lambda: parse_call(json.dumps(request_body).encode(), None),
        CANCEL_BINDING,
        agent_name=conversation["agent"],
    )


async def _serve(request: Request, binding: ChatBinding, body: dict[str, Any], agent: str) -> Response:
    response = await serve_call(request, lambda: parse_call(json.dumps(body).encode(), None), binding, agent_name=agent)
    if binding.failure is not None:  # refused before the mesh: the turn says so
        await binding.save("failed")
    return response
